// Folding two adjacent frozen layers into one (layer-merge.ts, compact.ts): the view (contents, modes,
// times, symlinks, hard links, whiteouts, opaque directories), the change set and the diff are the same
// before and after, for the delta and for a fork sharing the layers; the pair can then leave the disk; a
// build or switch cut short at any step leaves the old stack or the new one and no leftover.
import { lstat, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { compactStack } from '../../src/delta/compact.js';
import type { Delta } from '../../src/delta/delta.js';
import { initDeltaStack } from '../../src/delta/init-stack.js';
import { layerFs } from '../../src/delta/layer-fs.js';
import { mergeFs } from '../../src/delta/layer-merge.js';
import { fixture, read, write, type Fixture } from './fixture.js';
import { failpoint, type Failpoint } from './failpoint.js';
import { viewOf } from './layer-view.js';

afterEach(() => {
  vi.restoreAllMocks();
});

interface Scenario extends Fixture {
  readonly layers: string[];
}

/** A delta on three frozen layers (the first two to fold) and changes in its writable layer. */
async function scenario(): Promise<Scenario> {
  const f = await fixture({
    'a.txt': 'A',
    'gone.txt': 'G',
    'd/x': 'X',
    'd/sub/y': 'Y',
    'opq/o1': 'O1',
    'keep/k': 'K',
  });
  const { delta } = f;
  const layers = ['l1', 'l2', 'l3'].map((name) => join(f.root, 'layers', name));
  await layerFs.mkdir(join(f.root, 'layers'));
  // Layer 1: adds, a hard link, a symlink, a delete, a change of mode and times, an opaque directory.
  await write(delta, '/new.txt', 'new');
  await delta.link('/new.txt', '/hard.txt');
  await delta.symlink('new.txt', '/ln');
  await delta.mkdir('/nd', 0o750);
  await write(delta, '/nd/f', 'f1');
  await delta.unlink('/gone.txt');
  await write(delta, '/d/x', 'X1');
  await delta.setattr('/a.txt', { mode: 0o600, mtime: 1_000_000_000_123_456_789n });
  await delta.unlink('/opq/o1');
  await delta.rmdir('/opq');
  await delta.mkdir('/opq', 0o755);
  await write(delta, '/opq/o2', 'O2');
  await delta.checkpoint({ layerDir: layers[0] as string });
  // Layer 2: over layer 1's entries and the codebase's.
  await write(delta, '/nd/f', 'f2');
  await delta.unlink('/d/sub/y');
  await write(delta, '/d/sub/z', 'Z');
  await delta.unlink('/ln');
  await delta.symlink('d/x', '/ln2');
  await write(delta, '/l2.txt', 'two');
  await delta.unlink('/keep/k');
  await delta.rmdir('/keep');
  await delta.setattr('/nd', { mode: 0o700, mtime: 2_000_000_000_000_000_001n });
  await delta.checkpoint({ layerDir: layers[1] as string });
  // Layer 3 and the writable layer, above the pair.
  await write(delta, '/top.txt', 'top');
  await delta.checkpoint({ layerDir: layers[2] as string });
  await write(delta, '/w.txt', 'w');
  return { ...f, layers };
}

/** What a user checks: the view, the change set and the diff. */
async function seen(delta: Delta): Promise<unknown> {
  return { view: await viewOf(delta), changes: await delta.changes(), diff: await delta.diff() };
}

describe('folding two frozen layers', () => {
  it('shows the same view, change set and diff, and the pair can then go', async () => {
    const f = await scenario();
    const [l1, l2, l3] = f.layers as [string, string, string];
    const before = await seen(f.delta);
    const merged = join(f.root, 'layers', 'm');
    const reading = await f.delta.openForRead('/nd/f'); // a reader across the switch
    const done = await compactStack(f.delta, { from: [l1, l2], to: merged });
    expect(done.switched).toBe(true);
    expect(done.bytes).toBeGreaterThan(0);
    expect(f.delta.frozenLayers).toEqual([merged, l3]);
    expect(await seen(f.delta)).toEqual(before);
    expect(await reading.readFile('utf8')).toBe('f2');
    await reading.close();
    // Hard links stay one file; entries keep their inodes (nothing copied).
    const [a, b] = await Promise.all([
      lstat(join(merged, 'upper', 'new.txt')),
      lstat(join(merged, 'upper', 'hard.txt')),
    ]);
    expect(a.ino).toBe(b.ino);
    expect((await lstat(join(merged, 'upper', 'nd', 'f'))).ino).toBe(
      (await lstat(join(l2, 'upper', 'nd', 'f'))).ino,
    );
    // Nothing of the pair is needed any more: removed, the view is the same, also after a reopen.
    await rm(l1, { recursive: true });
    await rm(l2, { recursive: true });
    expect(await seen(f.delta)).toEqual(before);
    await f.delta.close();
    const again = await f.open();
    expect(again.frozenLayers).toEqual([merged, l3]);
    expect(await seen(again)).toEqual(before);
    expect(await read(again, '/hard.txt')).toBe('new');
  });

  it('serves a fork sharing the layers the same, and a second holder reuses the merged layer', async () => {
    const f = await scenario();
    const [l1, l2, l3] = f.layers as [string, string, string];
    const forkDir = join(f.root, 'fork');
    await initDeltaStack({ deltaDir: forkDir, frozen: f.layers });
    const fork = await f.open(forkDir);
    const forkBefore = await seen(fork);
    const before = await seen(f.delta);
    const merged = join(f.root, 'layers', 'm');
    // Built once, without switching; then each holder switches onto it.
    expect((await compactStack(f.delta, { from: [l1, l2], to: merged, switchStack: false })).switched).toBe(
      false,
    );
    expect(f.delta.frozenLayers).toEqual(f.layers);
    const made = (await stat(merged)).ino;
    expect((await compactStack(fork, { from: [l1, l2], to: merged })).switched).toBe(true);
    expect((await compactStack(f.delta, { from: [l1, l2], to: merged })).switched).toBe(true);
    expect((await stat(merged)).ino).toBe(made);
    expect(fork.frozenLayers).toEqual([merged, l3]);
    expect(await seen(fork)).toEqual(forkBefore);
    expect(await seen(f.delta)).toEqual(before);
    // A stack that does not hold the pair is left alone.
    expect((await compactStack(f.delta, { from: [l1, l2], to: merged })).switched).toBe(false);
  });

  it('restores each checkpoint exactly over the merged layer', async () => {
    const f = await scenario();
    const [l1, l2, l3] = f.layers as [string, string, string];
    await f.delta.restore({ frozen: [l1, l2] });
    const atSecond = await viewOf(f.delta);
    await f.delta.restore({ frozen: [l1, l2, l3] });
    const atThird = await viewOf(f.delta);
    const merged = join(f.root, 'layers', 'm');
    await compactStack(f.delta, { from: [l1, l2], to: merged });
    await f.delta.restore({ frozen: [merged] });
    expect(await viewOf(f.delta)).toEqual(atSecond);
    await f.delta.restore({ frozen: [merged, l3] });
    expect(await viewOf(f.delta)).toEqual(atThird);
  });

  it('refuses a pair that is not two distinct layers', async () => {
    const f = await scenario();
    const [l1] = f.layers as [string];
    await expect(compactStack(f.delta, { from: [l1, l1], to: join(f.root, 'm') })).rejects.toThrow(
      /two adjacent frozen layers/,
    );
  });
});

/** The process "dies" at a step of the merge or the switch: that step and every later one fail. */
/** Every host step of the merge and of the layer switch can be the crash's. */
function crashingAt(step: number): Failpoint {
  return failpoint(step).wrap(mergeFs).wrap(layerFs);
}

describe('a compaction cut short', () => {
  it('leaves the old stack or the new one at every step, and a retry finishes with no leftover', async () => {
    const probe = await scenario();
    const counter = crashingAt(Infinity);
    await compactStack(probe.delta, {
      from: [probe.layers[0], probe.layers[1]] as string[],
      to: join(probe.root, 'layers', 'm'),
    });
    const total = counter.steps();
    vi.restoreAllMocks();
    expect(total).toBeGreaterThan(10);
    for (let crashAt = 0; crashAt < total; crashAt++) {
      const f = await scenario();
      const [l1, l2, l3] = f.layers as [string, string, string];
      const before = await seen(f.delta);
      const merged = join(f.root, 'layers', 'm');
      crashingAt(crashAt);
      await expect(compactStack(f.delta, { from: [l1, l2], to: merged })).rejects.toThrow(/died/);
      vi.restoreAllMocks();
      await f.delta.close();
      // The restart: a new worker opens the delta; whichever stack it records shows the same.
      const reopened = await f.open();
      const stack = reopened.frozenLayers;
      expect([f.layers, [merged, l3]], `step ${crashAt}`).toContainEqual(stack);
      expect(await seen(reopened), `step ${crashAt}`).toEqual(before);
      await compactStack(reopened, { from: [l1, l2], to: merged });
      expect(reopened.frozenLayers).toEqual([merged, l3]);
      expect(await seen(reopened), `step ${crashAt}`).toEqual(before);
      expect((await readdir(join(f.root, 'layers'))).sort(), `step ${crashAt}`).toEqual([
        'l1',
        'l2',
        'l3',
        'm',
      ]);
    }
  }, 180_000);
});
