// The location cache of a stack of frozen layers (stack-view.ts): bounded, one probe once a path is
// remembered, and never stale. A remembered location must never show a file of another state: after a
// restore, a checkpoint or a commit, a file that state hides or dropped stays hidden, and every path shows
// what that state holds (through lookup, the synchronous lookup and a read).
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import type { DeltaContext } from '../../src/delta/context.js';
import type { Delta } from '../../src/delta/delta.js';
import {
  CODEBASE,
  HIDDEN,
  LOCATION_CACHE_SIZE,
  LocationCache,
  StackView,
} from '../../src/delta/stack-view.js';
import { fixture, read, write } from './fixture.js';

const PATHS = ['/a.txt', '/secret', '/d/x', '/d/new', '/gone.txt'];

/** What the sandbox sees at each of PATHS: the content, or null. Each path asked three ways, which must agree. */
async function seen(delta: Delta): Promise<Record<string, string | null>> {
  const out: Record<string, string | null> = {};
  for (const path of PATHS) {
    const found = await delta.lookup(path);
    const quick = delta.lookupIfCached(path);
    if (quick !== undefined) expect(quick === null, `lookupIfCached ${path}`).toBe(found === null);
    out[path] = found === null ? null : await read(delta, path);
  }
  return out;
}

function lowerOf(delta: Delta): DeltaContext['lower'] {
  return (delta as unknown as { ctx: DeltaContext }).ctx.lower;
}

describe('LocationCache', () => {
  it('holds at most its size, forgetting the oldest path first', () => {
    const cache = new LocationCache();
    for (let i = 0; i <= LOCATION_CACHE_SIZE; i++) cache.set(`p${i}`, i % 3);
    expect(cache.size).toBe(LOCATION_CACHE_SIZE);
    expect(cache.get('p0')).toBeUndefined();
    expect(cache.get('p1')).toBe(1);
    expect(cache.get(`p${LOCATION_CACHE_SIZE}`)).toBe(LOCATION_CACHE_SIZE % 3);
    cache.set('p1', HIDDEN); // an update takes no other entry's place
    expect(cache.size).toBe(LOCATION_CACHE_SIZE);
    expect(cache.get('p2')).toBe(2);
  });
});

describe('the location cache of a stack', () => {
  it('remembers where each path resolves, so a read through 8 layers probes one', async () => {
    const f = await fixture({ 'a.txt': 'A', 'd/x': 'X' });
    for (let k = 0; k < 8; k++) {
      await write(f.delta, `/l${k}`, `L${k}`);
      await f.delta.checkpoint({ layerDir: join(f.root, `layer${k}`) });
    }
    const lower = lowerOf(f.delta);
    expect(lower).toBeInstanceOf(StackView);
    const stack = lower as StackView;
    expect(await read(f.delta, '/l0')).toBe('L0');
    expect(await read(f.delta, '/a.txt')).toBe('A');
    expect(await f.delta.lookup('/nothing')).toBeNull();
    expect(await stack.locate('l0')).toBe(0);
    expect(await stack.locate('l7')).toBe(7);
    expect(await stack.locate('a.txt')).toBe(CODEBASE);
    expect(stack.locateIfCached('l0')).toBe(0);
    expect(stack.cachedPaths).toBeGreaterThanOrEqual(4);
  });

  it('never shows a hidden or dropped file again: restore, checkpoint and commit each start afresh', async () => {
    const f = await fixture({ 'a.txt': 'A', 'd/x': 'X', 'gone.txt': 'G' });
    const { delta } = f;
    const l1 = join(f.root, 'l1');
    const l2 = join(f.root, 'l2');
    const l3 = join(f.root, 'l3');
    // l1: a secret, a change of a codebase file, a new file in a codebase directory.
    await write(delta, '/secret', 'S1');
    await write(delta, '/a.txt', 'A1');
    await write(delta, '/d/new', 'N1');
    await delta.checkpoint({ layerDir: l1 });
    const atL1 = { '/a.txt': 'A1', '/secret': 'S1', '/d/x': 'X', '/d/new': 'N1', '/gone.txt': 'G' };
    expect(await seen(delta)).toEqual(atL1);
    // l2: the secret and a codebase file deleted (whiteouts over the layer and the codebase below).
    await delta.unlink('/secret');
    await delta.unlink('/gone.txt');
    await delta.checkpoint({ layerDir: l2 });
    const atL2 = { ...atL1, '/secret': null, '/gone.txt': null };
    expect(await seen(delta)).toEqual(atL2);
    // l3: the directory holding a frozen file removed and made again (opaque).
    await delta.unlink('/d/new');
    await delta.unlink('/d/x');
    await delta.rmdir('/d');
    await delta.mkdir('/d', 0o755);
    await delta.checkpoint({ layerDir: l3 });
    const atL3 = { ...atL2, '/d/x': null, '/d/new': null };
    expect(await seen(delta)).toEqual(atL3);

    // Each state is shown as it is, whatever the stack before it remembered.
    await delta.restore({ frozen: [l1] });
    expect(await seen(delta)).toEqual(atL1);
    await delta.restore({ frozen: [l1, l2, l3] });
    expect(await seen(delta)).toEqual(atL3);
    await delta.restore({ frozen: [l1, l2] });
    expect(await seen(delta)).toEqual(atL2);
    await delta.restore({ frozen: [] });
    const codebase = { '/a.txt': 'A', '/secret': null, '/d/x': 'X', '/d/new': null, '/gone.txt': 'G' };
    expect(await seen(delta)).toEqual(codebase);
    await delta.restore({ frozen: [l1] });
    expect(await seen(delta)).toEqual(atL1);

    // A checkpoint over a stack: the writable layer's deletion frozen on top of remembered locations.
    await delta.unlink('/secret');
    expect(await seen(delta)).toEqual({ ...atL1, '/secret': null });
    await delta.checkpoint({ layerDir: join(f.root, 'l4') });
    expect(await seen(delta)).toEqual({ ...atL1, '/secret': null });

    // A commit flattens the stack: the codebase then holds what the stack showed.
    await delta.restore({ frozen: [l1, l2] });
    expect(await seen(delta)).toEqual(atL2);
    const result = await delta.commit({ mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect(delta.frozenLayers).toEqual([]);
    expect(await seen(delta)).toEqual(atL2);
    // Back on l1 after the commit: l1's files over the codebase as it is now (the commit is not undone in
    // the codebase, but l1 shows its own secret and its own a.txt again), and gone.txt, committed as a
    // deletion, stays gone.
    await delta.restore({ frozen: [l1] });
    expect(await seen(delta)).toEqual({ ...atL1, '/gone.txt': null });
  });

  it('reuses the layers still in the stack after a restore, and closes the others later', async () => {
    const f = await fixture({ 'a.txt': 'A' });
    const dirs = [join(f.root, 'l1'), join(f.root, 'l2')];
    for (const [i, dir] of dirs.entries()) {
      await write(f.delta, `/f${i}`, `F${i}`);
      await f.delta.checkpoint({ layerDir: dir });
    }
    const before = lowerOf(f.delta) as StackView;
    expect(await read(f.delta, '/f0')).toBe('F0');
    await f.delta.restore({ frozen: [dirs[0] as string] });
    const after = lowerOf(f.delta) as StackView;
    expect(after).not.toBe(before);
    expect(after.cachedPaths).toBe(0); // a new stack remembers nothing of the old one
    expect(await read(f.delta, '/f0')).toBe('F0');
    expect(await f.delta.lookup('/f1')).toBeNull();
    await f.delta.restore({ frozen: dirs });
    expect(await read(f.delta, '/f1')).toBe('F1');
  });
});
