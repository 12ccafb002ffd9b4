// The hot path: finds the winning rule for a normalised path using the indexes from compile.ts. Rules are
// ranked once, so "the winner" is simply the matching rule with the smallest rank. Exact lookups (file and
// directory Maps) run first because they are cheap and usually lower the bar; each glob bucket is sorted by
// rank and a scan stops as soon as its next entry could no longer beat the best rank found so far.
import type { GlobEntry, RuleIndex } from './compile.js';

function scan(list: readonly GlobEntry[] | undefined, subject: string, best: number): number {
  if (list === undefined) return best;
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

  const { dirs, anchored, bySegment } = index;
  if (dirs.size > 0) {
    const root = dirs.get('/');
    if (root !== undefined && root < best) best = root;
    for (let i = path.indexOf('/', 1); ; i = path.indexOf('/', i + 1)) {
      const rank = dirs.get(i === -1 ? path : path.slice(0, i));
      if (rank !== undefined && rank < best) best = rank;
      if (i === -1) break;
    }
  }
  // Globs never match the root (it has no name); only `/` file and directory rules can.
  if (path.length === 1 || best === 0) return best;

  const rel = path.slice(1);
  if (anchored.size > 0 || bySegment.size > 0) {
    for (let start = 1; ;) {
      const end = path.indexOf('/', start);
      if (anchored.size > 0) best = scan(anchored.get(end === -1 ? path : path.slice(0, end)), rel, best);
      if (bySegment.size > 0)
        best = scan(bySegment.get(path.slice(start, end === -1 ? path.length : end)), rel, best);
      if (end === -1) break;
      start = end + 1;
    }
  }
  const base = path.slice(path.lastIndexOf('/') + 1);
  if (index.byExtension.size > 0) {
    const dot = base.lastIndexOf('.');
    if (dot !== -1) best = scan(index.byExtension.get(base.slice(dot + 1)), base, best);
  }
  for (const e of index.generic) {
    if (e.rank >= best) break;
    const subject = e.onBasename ? base : rel;
    if ((e.needs === null || subject.includes(e.needs)) && e.test(subject)) return e.rank;
  }
  return best;
}
