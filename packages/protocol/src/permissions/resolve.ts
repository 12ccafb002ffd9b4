// The hot path: finds the winning rule for a normalised path using the indexes from compile.ts. Rules are
// ranked once, so "the winner" is simply the matching rule with the smallest rank. One walk over the path's
// segments does the indexing: it follows the rule tree (file and directory rules, anchored globs) while the
// path stays inside it, and looks each segment up in the segment index (`**/x/**` globs). Glob buckets are
// sorted by rank, and a scan stops as soon as its next entry could no longer beat the best rank so far.
import type { GlobEntry, RuleIndex, TreeNode } from './compile.js';

function scan(list: readonly GlobEntry[], subject: string, best: number): number {
  for (const e of list) {
    if (e.rank >= best) break;
    if ((e.needs === null || subject.includes(e.needs)) && e.test(subject)) return e.rank;
  }
  return best;
}

/** The rank of the winning rule for a normalised path, or `index.ranked.length` when no rule matches. */
export function resolveRank(index: RuleIndex, path: string): number {
  let best = index.ranked.length;
  let node: TreeNode | undefined = index.tree;
  if (node.dirRank < best) best = node.dirRank;
  // Globs never match the root (it has no name); only `/` file and directory rules can.
  if (path.length === 1) return Math.min(best, node.fileRank);

  const { bySegment, segmentFilter } = index;
  const length = path.length;
  // The root-relative path that path-scope globs are tested against; sliced only when a bucket needs it.
  let rel: string | undefined;
  let start = 1;
  for (;;) {
    const found = path.indexOf('/', start);
    const end = found === -1 ? length : found;
    const children: Map<string, TreeNode> | null = node?.children ?? null;
    const segmentKey = (segmentFilter[(end - start) & 31]! & (1 << (path.charCodeAt(start) & 31))) !== 0;
    // Slice the segment only when some index can use it.
    if (children !== null || segmentKey) {
      const name = path.slice(start, end);
      node = children?.get(name);
      if (node !== undefined) {
        if (node.dirRank < best) best = node.dirRank;
        if (found === -1 && node.fileRank < best) best = node.fileRank;
        if (node.globs.length > 0) best = scan(node.globs, (rel ??= path.slice(1)), best);
      }
      if (segmentKey) {
        const list = bySegment.get(name);
        if (list !== undefined) best = scan(list, (rel ??= path.slice(1)), best);
      }
    } else {
      node = undefined;
    }
    if (found === -1) break;
    start = found + 1;
  }
  const name = path.slice(start);
  if (index.byExtension.size > 0) {
    const dot = name.lastIndexOf('.');
    if (dot !== -1) {
      const list = index.byExtension.get(name.slice(dot + 1));
      if (list !== undefined) best = scan(list, name, best);
    }
  }
  for (const e of index.generic) {
    if (e.rank >= best) break;
    const subject = e.onBasename ? name : (rel ??= path.slice(1));
    if ((e.needs === null || subject.includes(e.needs)) && e.test(subject)) return e.rank;
  }
  return best;
}
