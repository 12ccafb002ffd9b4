// delta/meta-state.ts: the index of whiteouts and base records, kept as one node per path component (no
// path string per level). The records behave as they did over path-keyed maps: first base wins, unbase,
// move of adds, forget of a path or a subtree, snapshot and load.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { ABSENT } from '../../src/delta/identity.js';
import type { BaseRecord } from '../../src/delta/identity.js';
import { MetaState } from '../../src/delta/meta-state.js';

// A full collection on demand, so the heap measured holds what is reachable only.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const EXISTED: BaseRecord = {
  exists: true,
  type: 'file',
  size: '3',
  mtimeNs: '1',
  ctimeNs: '1',
  ino: '7',
  dev: '1',
  mode: 0o644,
};

describe('MetaState', () => {
  it('answers whiteouts, hidden paths and bases by path', () => {
    const meta = new MetaState();
    expect(meta.empty).toBe(true);
    meta.apply({ op: 'whiteout', path: 'a/b' });
    meta.apply({ op: 'base', path: 'a/b', base: EXISTED });
    meta.apply({ op: 'base', path: 'a/b', base: ABSENT }); // first sight wins
    meta.apply({ op: 'base', path: 'x', base: ABSENT });
    expect(meta.isWhiteout('a/b')).toBe(true);
    expect(meta.isWhiteout('a')).toBe(false);
    expect(meta.isHidden('a/b/c/d')).toBe(true);
    expect(meta.isHidden('a')).toBe(false);
    expect(meta.hasWhiteoutBelow('a')).toBe(true);
    expect(meta.hasWhiteoutBelow('a/b')).toBe(false);
    expect(meta.whiteoutsIn('a')).toEqual(new Set(['b']));
    expect(meta.base('a/b')).toEqual(EXISTED);
    expect(meta.hasBase('a')).toBe(false);
    expect([...meta.whiteoutPaths()]).toEqual(['a/b']);
    meta.apply({ op: 'unbase', path: 'x' });
    expect(meta.hasBase('x')).toBe(false);
  });

  it('moves only the adds below a renamed directory, and forgets a path or a subtree', () => {
    const meta = new MetaState();
    meta.apply({ op: 'base', path: 'd/new', base: ABSENT });
    meta.apply({ op: 'base', path: 'd/sub/deeper', base: ABSENT });
    meta.apply({ op: 'base', path: 'd/old', base: EXISTED });
    meta.apply({ op: 'move', from: 'd', to: 'e/f' });
    expect(meta.base('e/f/new')).toEqual(ABSENT);
    expect(meta.base('e/f/sub/deeper')).toEqual(ABSENT);
    expect(meta.hasBase('d/new')).toBe(false);
    expect(meta.base('d/old')).toEqual(EXISTED);
    meta.apply({ op: 'whiteout', path: 'e/f/gone' });
    meta.apply({ op: 'forget', path: 'e/f/new', subtree: false });
    expect(meta.hasBase('e/f/new')).toBe(false);
    expect(meta.hasBase('e/f/sub/deeper')).toBe(true);
    meta.apply({ op: 'forget', path: 'e', subtree: true });
    expect(meta.isHidden('e/f/gone')).toBe(false);
    expect(meta.hasBase('e/f/sub/deeper')).toBe(false);
    meta.apply({ op: 'forget', path: 'd/old', subtree: false });
    expect(meta.empty).toBe(true);
  });

  it('moves a tree of adds whole, and the result is the same as records made at the new place', () => {
    const meta = new MetaState();
    const names = ['a', 'a/b', 'a/b/c', 'a/b/c/d.txt', 'a/e.txt', 'a/f', 'a/f/g.txt'];
    for (const path of names) meta.apply({ op: 'base', path: `src/${path}`, base: ABSENT });
    meta.apply({ op: 'base', path: 'src', base: ABSENT });
    meta.apply({ op: 'whiteout', path: 'dst/gone' }); // a sibling of the destination stays
    meta.apply({ op: 'move', from: 'src/a', to: 'dst/a2' });
    const expected = new MetaState();
    for (const path of names.slice(1))
      expected.apply({ op: 'base', path: `dst/a2/${path.slice(2)}`, base: ABSENT });
    expected.apply({ op: 'base', path: 'src', base: ABSENT });
    expected.apply({ op: 'base', path: 'src/a', base: ABSENT });
    expected.apply({ op: 'whiteout', path: 'dst/gone' });
    const sorted = (m: MetaState) => {
      const snap = m.snapshot(1);
      return { whiteouts: [...snap.whiteouts].sort(), bases: [...snap.bases].sort() };
    };
    expect(sorted(meta)).toEqual(sorted(expected));
    // The moved nodes answer at their new paths, through their new parents, and further records land there.
    expect(meta.base('dst/a2/b/c/d.txt')).toEqual(ABSENT);
    expect(meta.hasBase('src/a/b')).toBe(false);
    meta.apply({ op: 'whiteout', path: 'dst/a2/b/c' });
    expect(meta.isHidden('dst/a2/b/c/d.txt')).toBe(true);
    expect(meta.isHidden('src/a/b/c/d.txt')).toBe(false);
    meta.apply({ op: 'forget', path: 'dst', subtree: true });
    meta.apply({ op: 'forget', path: 'src', subtree: true });
    expect(meta.empty).toBe(true);
  });

  it('moves into a destination that holds records below it, keeping them', () => {
    const meta = new MetaState();
    meta.apply({ op: 'base', path: 'n/x', base: ABSENT });
    meta.apply({ op: 'whiteout', path: 'old/y' }); // a codebase directory whose entries were deleted
    meta.apply({ op: 'move', from: 'n', to: 'old' });
    expect(meta.base('old/x')).toEqual(ABSENT);
    expect(meta.isWhiteout('old/y')).toBe(true);
    expect(meta.hasBase('n/x')).toBe(false);
  });

  it('a snapshot loads back into the same state', () => {
    const meta = new MetaState();
    meta.apply({ op: 'whiteout', path: 'w' });
    meta.apply({ op: 'base', path: 'w', base: EXISTED });
    meta.apply({ op: 'base', path: 'p/q', base: ABSENT });
    const snapshot = meta.snapshot(4);
    expect(snapshot.generation).toBe(4);
    expect(snapshot.whiteouts).toEqual(['w']);
    expect([...snapshot.bases].sort()).toEqual([
      ['p/q', ABSENT],
      ['w', EXISTED],
    ]);
    const loaded = new MetaState();
    loaded.apply({ op: 'whiteout', path: 'stale' });
    loaded.load(snapshot);
    expect(loaded.isWhiteout('stale')).toBe(false);
    expect(loaded.snapshot(4)).toEqual(snapshot);
  });

  it('keeps each level of a deep chain of long names once, not as a path per level', () => {
    const meta = new MetaState();
    const name = 'd'.repeat(255);
    const levels = 600;
    const collect = (): number => {
      gc();
      return process.memoryUsage().heapUsed;
    };
    const before = collect();
    for (let level = 1; level <= levels; level++) {
      meta.apply({ op: 'base', path: Array<string>(level).fill(name).join('/'), base: ABSENT });
    }
    // Path-keyed maps held the sum of the paths: ~46 MB here (~184 MB at 1,200 levels); nodes, ~0.3 MB.
    expect(collect() - before).toBeLessThan(8 * 1024 * 1024);
    expect(meta.hasBase(Array<string>(levels).fill(name).join('/'))).toBe(true);
  }, 30_000);
});
