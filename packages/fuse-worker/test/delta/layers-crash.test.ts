// A checkpoint or a restore interrupted at any moment (every host step and metadata write of it is tried
// as the moment the process dies): the reopened delta shows either the state before or the state after,
// its stack says which, nothing of the sandbox's is lost, and the older frozen layers are untouched.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';

import type { Delta } from '../../src/delta/delta.js';
import { MetaJournal } from '../../src/delta/journal.js';
import { layerFs } from '../../src/delta/layer-fs.js';
import { failpoint, type Failpoint } from './failpoint.js';
import { fixture, read, write, type Fixture } from './fixture.js';
import { hostState, viewOf } from './layer-view.js';

// A checkpoint or restore never syncs the filesystem (README, "Frozen layers"): checked below.
const synced = vi.hoisted(() => ({ dirs: [] as string[] }));
vi.mock('../../src/host/sync-fs.js', () => ({
  syncFilesystem: (dir: string): Promise<boolean> => {
    synced.dirs.push(dir);
    return Promise.resolve(true);
  },
}));

/** The process "dies" at a step: that step and every later one fail. */
/**
 * Makes the `crashAt`-th step of a layer change die (never, with Infinity): every host operation of
 * layer-fs.ts and every metadata snapshot the journal writes.
 */
function crashingAt(crashAt: number): Failpoint {
  return failpoint(crashAt).wrap(layerFs).wrap(MetaJournal.prototype, ['compact', 'reset']);
}

afterEach(() => {
  vi.restoreAllMocks();
});

/** A delta with one frozen layer and more changes in its writable layer. */
async function scenario(): Promise<Fixture & { l1: string; codebase: Record<string, string> }> {
  const f = await fixture({ 'a.txt': 'A', 'gone.txt': 'G', 'd/x': 'X', 'd/sub/y': 'Y' });
  const { delta } = f;
  const codebase = await viewOf(delta);
  await write(delta, '/a.txt', 'one');
  await delta.mkdir('/new', 0o750);
  await write(delta, '/new/f', 'F');
  const l1 = join(f.root, 'l1');
  await delta.checkpoint({ layerDir: l1 });
  await write(delta, '/a.txt', 'two');
  await delta.unlink('/gone.txt');
  await delta.unlink('/new/f');
  await delta.symlink('a.txt', '/new/ln');
  await delta.unlink('/d/sub/y');
  await delta.rmdir('/d/sub');
  await delta.mkdir('/d/sub', 0o700);
  await write(delta, '/d/sub/z', 'Z');
  return { ...f, l1, codebase };
}

/** What the test compares after a crash and a reopen. */
async function outcome(f: Fixture, delta: Delta): Promise<Record<string, unknown>> {
  return {
    view: await viewOf(delta),
    frozen: delta.frozenLayers,
    meta: (await readdir(join(f.deltaDir, 'meta'))).filter((n) => n.endsWith('.json')).sort(),
    root: (await readdir(f.root)).sort(),
  };
}

describe('a checkpoint interrupted at any moment', () => {
  it('leaves the delta as before or as after it, never anything else, and works on', async () => {
    const reference = await scenario();
    const counted = crashingAt(Number.POSITIVE_INFINITY);
    synced.dirs.length = 0;
    await reference.delta.checkpoint({ layerDir: join(reference.root, 'l2') });
    expect(synced.dirs).toEqual([]);
    const total = counted.steps();
    vi.restoreAllMocks();
    expect(total).toBeGreaterThan(8);

    const seen = new Set<string>();
    for (let crashAt = 0; crashAt < total; crashAt++) {
      const f = await scenario();
      const l2 = join(f.root, 'l2');
      const before = await outcome(f, f.delta);
      const layer1 = await hostState(f.l1);
      crashingAt(crashAt);
      await expect(f.delta.checkpoint({ layerDir: l2 })).rejects.toThrow(/died before/);
      vi.restoreAllMocks();
      // The next worker opens the same delta.
      const again = await f.open();
      const state = await outcome(f, again);
      const rolledForward = (state.frozen as string[]).length === 2;
      seen.add(rolledForward ? 'after' : 'before');
      const expected = rolledForward
        ? { ...before, frozen: [f.l1, l2], root: [...(before.root as string[]), 'l2'].sort() }
        : before;
      expect({ crashAt, ...state }).toEqual({ crashAt, ...expected });
      expect(await hostState(f.l1)).toEqual(layer1);
      // It works on: a change, and the checkpoint (again, or the next one).
      await write(again, '/later', 'L');
      await again.checkpoint({ layerDir: join(f.root, 'l3') });
      expect(await read(again, '/later')).toBe('L');
      expect(await read(again, '/a.txt')).toBe('two');
    }
    expect([...seen].sort()).toEqual(['after', 'before']);
  }, 120_000);
});

describe('a restore interrupted at any moment', () => {
  it('leaves the delta as before or as restored', async () => {
    const reference = await scenario();
    const counted = crashingAt(Number.POSITIVE_INFINITY);
    await reference.delta.restore({ frozen: [] });
    const total = counted.steps();
    vi.restoreAllMocks();
    expect(await viewOf(reference.delta)).toEqual(reference.codebase);
    expect(total).toBeGreaterThan(3);

    const seen = new Set<string>();
    for (let crashAt = 0; crashAt < total; crashAt++) {
      const f = await scenario();
      const before = await outcome(f, f.delta);
      crashingAt(crashAt);
      await expect(f.delta.restore({ frozen: [] })).rejects.toThrow(/died before/);
      vi.restoreAllMocks();
      const again = await f.open();
      const state = await outcome(f, again);
      const restored = (state.frozen as string[]).length === 0;
      seen.add(restored ? 'after' : 'before');
      const expected = restored ? { ...before, view: f.codebase, frozen: [] } : before;
      expect({ crashAt, ...state }).toEqual({ crashAt, ...expected });
    }
    expect([...seen].sort()).toEqual(['after', 'before']);
  }, 60_000);
});
