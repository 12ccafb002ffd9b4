// The hot path: finds the winning rule for a normalised path using the indexes from compile.ts. Rules are
// ranked once, so "the winner" is simply the matching rule with the smallest rank. One walk over the path's
// segments does everything: it follows the rule tree (directory rules, anchored globs) while the path stays
// inside it, and looks each segment up in the segment index (`**/x/**` globs). Glob buckets are sorted by
// rank, and a scan stops as soon as its next entry could no longer beat the best rank found so far.
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
  const file = index.files.get(path);
  if (file !== undefined) best = file;
  let node: TreeNode | undefined = index.tree;
  if (node.dirRank < best) best = node.dirRank;
  // Globs never match the root (it has no name); only `/` file and directory rules can.
  if (path.length === 1) return best;

  const { bySegment } = index;
  // The root-relative path that path-scope globs are tested against; sliced only when a bucket needs it.
  let rel: string | undefined;
  let name: string;
  for (let start = 1; ;) {
    const end = path.indexOf('/', start);
    name = end === -1 ? path.slice(start) : path.slice(start, end);
    if (node !== undefined) {
      node = node.children?.get(name);
      if (node !== undefined) {
        if (node.dirRank < best) best = node.dirRank;
        if (node.globs.length > 0) best = scan(node.globs, (rel ??= path.slice(1)), best);
      }
    }
    if (bySegment.size > 0) {
      const list = bySegment.get(name);
      if (list !== undefined) best = scan(list, (rel ??= path.slice(1)), best);
    }
    if (end === -1) break;
    start = end + 1;
  }
  // `name` is now the basename.
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
