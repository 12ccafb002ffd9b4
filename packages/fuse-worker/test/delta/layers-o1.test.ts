// A checkpoint freezes the writable layer's metadata files as they are (snapshot + journal, linked) and a
// restore renames the dropped upper/ into the trash, removed in the background: what a reopen reads back
// must equal what the live delta showed, the trash must go, and the quota must not count it.
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';

import type { DeltaContext } from '../../src/delta/context.js';
import { Delta } from '../../src/delta/delta.js';
import { readFrozenMeta } from '../../src/delta/frozen-view.js';
import { trashFs } from '../../src/delta/trash.js';
import { fixture, read, write } from './fixture.js';
import { viewOf } from './layer-view.js';

const ctxOf = (d: Delta): DeltaContext => (d as unknown as { ctx: DeltaContext }).ctx;

afterEach(() => {
  vi.restoreAllMocks();
});

describe('a frozen layer loaded from its snapshot and journal', () => {
  it('shows what the live delta showed at the checkpoint, and holds the same state', async () => {
    const f = await fixture({ 'a.txt': 'A', 'gone.txt': 'G', 'd/x': 'X', 'd/sub/y': 'Y' });
    const { delta } = f;
    await write(delta, '/a.txt', 'one');
    await delta.mkdir('/new', 0o750);
    await write(delta, '/new/f', 'F');
    // Part of the state in a snapshot, the rest in the journal after it.
    await ctxOf(delta).journal.compact(ctxOf(delta).meta);
    await delta.unlink('/gone.txt');
    await delta.unlink('/d/sub/y');
    await delta.rmdir('/d/sub');
    await delta.mkdir('/d/sub', 0o700);
    await write(delta, '/d/sub/z', 'Z');
    await delta.symlink('a.txt', '/new/ln');
    const stateOf = (text: string): unknown => {
      // The same records, in whatever order the maps were filled.
      const v = JSON.parse(text) as { whiteouts: unknown[]; bases: unknown[] };
      return {
        whiteouts: v.whiteouts.map(String).sort(),
        bases: v.bases.map((b) => JSON.stringify(b)).sort(),
      };
    };
    const state = stateOf([...ctxOf(delta).meta.snapshotText(0)].join(''));
    const l1 = join(f.root, 'l1');
    await delta.checkpoint({ layerDir: l1 });
    expect((await readdir(join(l1, 'meta'))).sort()).toEqual(['frozen', 'journal-1.jsonl', 'snapshot.json']);
    const live = await viewOf(delta);

    expect(stateOf([...(await readFrozenMeta(l1)).snapshotText(0)].join(''))).toEqual(state);
    const again = await f.open();
    expect(await viewOf(again)).toEqual(live);
    // The delta's own metadata started over: nothing of the frozen state is recorded twice.
    expect(ctxOf(again).meta.empty).toBe(true);
    await again.close();
  });

  it('of a delta that never compacted is its journal alone', async () => {
    const f = await fixture({ 'a.txt': 'A', 'b.txt': 'B' });
    await write(f.delta, '/a.txt', 'one');
    await f.delta.unlink('/b.txt');
    const l1 = join(f.root, 'l1');
    await f.delta.checkpoint({ layerDir: l1 });
    expect((await readdir(join(l1, 'meta'))).sort()).toEqual(['frozen', 'journal-0.jsonl']);
    const live = await viewOf(f.delta);
    await write(f.delta, '/later', 'L'); // recorded in the delta's new journal, not the layer's
    const again = await f.open();
    expect(await viewOf(again)).toEqual(await viewOf(f.delta));
    await again.restore({ frozen: [l1] });
    expect(await viewOf(again)).toEqual(live);
    await again.close();
  });
});

describe('the trash of a restore', () => {
  it('is removed after the restore has answered', async () => {
    const f = await fixture({ 'a.txt': 'A' });
    for (let i = 0; i < 50; i++) await write(f.delta, `/f${String(i)}`, 'x');
    await f.delta.restore({ frozen: [] });
    expect(Object.keys(await viewOf(f.delta))).toEqual(['/a.txt']);
    await f.delta.trashEmptied();
    expect(await readdir(join(f.deltaDir, 'trash'))).toEqual([]);
    expect(await readdir(join(f.deltaDir, 'upper'))).toEqual([]);
  });

  it('left by a process death is removed by the next open', async () => {
    const f = await fixture({ 'a.txt': 'A' });
    const left = join(f.deltaDir, 'trash', 'upper-1-abc', 'd');
    await mkdir(left, { recursive: true });
    await writeFile(join(left, 'f'), 'x');
    const again = await f.open();
    await again.trashEmptied();
    expect(await readdir(join(f.deltaDir, 'trash'))).toEqual([]);
    expect(await read(again, '/a.txt')).toBe('A');
    await again.close();
  });

  it('is not charged to the disk quota of the new writable layer, even before it is removed', async () => {
    const f = await fixture({});
    await write(f.delta, '/big', 'x'.repeat(600_000));
    const delta = await Delta.open({ lowerDir: f.lower, deltaDir: f.deltaDir, diskQuotaBytes: 1 << 20 });
    let release = (): void => undefined;
    const held = new Promise<void>((done) => (release = done));
    const remove = trashFs.remove.bind(trashFs);
    vi.spyOn(trashFs, 'remove').mockImplementation(async (path) => {
      await held;
      await remove(path);
    });
    try {
      await delta.quota?.whenReady();
      expect(delta.quota?.used).toBeGreaterThan(600_000);
      await delta.restore({ frozen: [] });
      await delta.quota?.whenReady();
      expect(delta.quota?.used).toBeLessThan(64 * 1024);
      expect(await readdir(join(f.deltaDir, 'trash'))).toHaveLength(1); // still there
      await write(delta, '/new', 'y'.repeat(500_000)); // fits: the trash is not the writable layer's
      release();
      await delta.trashEmptied();
      expect(await readdir(join(f.deltaDir, 'trash'))).toEqual([]);
    } finally {
      release();
      await delta.close();
    }
  });
});
