// Frozen layers (checkpoints): what a user checks through the Delta API after a checkpoint, across the
// layers, after a restore and after a reopen; and that a frozen layer is never written again.
import { constants } from 'node:fs';
import { lstat, mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import type { DeltaContext } from '../../src/delta/context.js';
import { Delta } from '../../src/delta/delta.js';
import { fixture, names, read, write } from './fixture.js';
import { hostState, layerMeta, viewOf } from './layer-view.js';

const CODEBASE = {
  'a.txt': 'A',
  'keep.txt': 'K',
  'gone.txt': 'G',
  'd/x': 'X',
  'd/sub/y': 'Y',
  'e/z': 'Z',
  'empty/': '',
};

describe('Delta.checkpoint', () => {
  it('keeps the view exactly: files, directories, symlinks, modes, times, deletions', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await write(delta, '/a.txt', 'A changed');
    await delta.setattr('/a.txt', { mode: 0o600, mtime: 1_234_567_890_123_456_789n });
    await delta.mkdir('/new', 0o750);
    await write(delta, '/new/f', 'F', 0o640);
    await delta.symlink('../a.txt', '/new/link');
    await delta.unlink('/gone.txt');
    await delta.unlink('/e/z');
    await delta.rmdir('/e');
    await delta.unlink('/d/sub/y');
    await delta.rmdir('/d/sub');
    await delta.mkdir('/d/sub', 0o700); // opaque: the codebase's d/sub/y stays hidden
    await delta.setattr('/d', { mode: 0o711 });
    const before = await viewOf(delta);

    const layer = join(f.root, 'layer1');
    await delta.checkpoint({ layerDir: layer });

    expect(delta.frozenLayers).toEqual([layer]);
    expect(await viewOf(delta)).toEqual(before);
    expect(await readdir(join(f.deltaDir, 'upper'))).toEqual([]);
    expect((await readdir(layer)).sort()).toEqual(['meta', 'upper']);
    expect(await readFile(join(layer, 'upper', 'new', 'f'), 'utf8')).toBe('F');
    expect(await readFile(join(f.lower, 'a.txt'), 'utf8')).toBe('A');
  });

  it('moves the layer by renames: the frozen files are the inodes the sandbox wrote', async () => {
    const f = await fixture({});
    await write(f.delta, '/big', 'x'.repeat(100_000));
    const ino = (await lstat(join(f.deltaDir, 'upper', 'big'))).ino;
    await f.delta.checkpoint({ layerDir: join(f.root, 'l1') });
    expect((await lstat(join(f.root, 'l1', 'upper', 'big'))).ino).toBe(ino);
  });

  it('lets later changes shadow frozen ones, layer over layer', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await write(delta, '/a.txt', 'one');
    await write(delta, '/mine', 'one');
    await delta.checkpoint({ layerDir: join(f.root, 'l1') });
    await write(delta, '/a.txt', 'two');
    await delta.setattr('/mine', { mode: 0o600 });
    await delta.checkpoint({ layerDir: join(f.root, 'l2') });
    await write(delta, '/a.txt', 'three');
    expect(await read(delta, '/a.txt')).toBe('three');
    expect(await read(delta, '/mine')).toBe('one');
    expect(Number((await delta.lookup('/mine'))?.stat.mode) & 0o777).toBe(0o600);
    expect(await readFile(join(f.root, 'l1', 'upper', 'a.txt'), 'utf8')).toBe('one');
    expect(await readFile(join(f.root, 'l2', 'upper', 'a.txt'), 'utf8')).toBe('two');
  });

  it('shows a file deleted in one layer and created again in the next', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await delta.unlink('/a.txt');
    await write(delta, '/mine', 'M');
    await delta.checkpoint({ layerDir: join(f.root, 'l1') });
    expect(await delta.lookup('/a.txt')).toBeNull();
    await write(delta, '/a.txt', 'again');
    await delta.unlink('/mine');
    expect(await read(delta, '/a.txt')).toBe('again');
    expect(await delta.lookup('/mine')).toBeNull();
    expect(await names(delta, '/')).toEqual(['a.txt', 'd', 'e', 'empty', 'gone.txt', 'keep.txt']);
    await delta.checkpoint({ layerDir: join(f.root, 'l2') });
    expect(await read(delta, '/a.txt')).toBe('again');
    expect(await delta.lookup('/mine')).toBeNull();
    await expect(delta.openForRead('/mine')).rejects.toMatchObject({ errnoName: 'ENOENT' });
  });

  it('makes a directory removed and re-created over a layer that filled it opaque', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await write(delta, '/d/added', 'N');
    await delta.mkdir('/d/newdir', 0o755);
    await delta.checkpoint({ layerDir: join(f.root, 'l1') });
    expect(await names(delta, '/d')).toEqual(['added', 'newdir', 'sub', 'x']);
    await delta.unlink('/d/added');
    await delta.unlink('/d/x');
    await delta.rmdir('/d/newdir');
    await delta.unlink('/d/sub/y');
    await delta.rmdir('/d/sub');
    await delta.rmdir('/d');
    expect(await delta.lookup('/d')).toBeNull();
    await delta.mkdir('/d', 0o755);
    expect(await names(delta, '/d')).toEqual([]);
    expect(await delta.lookup('/d/x')).toBeNull();
    expect(await delta.lookup('/d/added')).toBeNull();
    await delta.checkpoint({ layerDir: join(f.root, 'l2') });
    expect(await names(delta, '/d')).toEqual([]);
    await write(delta, '/d/x', 'fresh');
    expect(await names(delta, '/d')).toEqual(['x']);
    expect(await read(delta, '/d/x')).toBe('fresh');
  });

  it('keeps a codebase file whited out in an older layer hidden', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await delta.unlink('/gone.txt');
    await delta.unlink('/d/sub/y');
    await delta.checkpoint({ layerDir: join(f.root, 'l1') });
    await write(delta, '/other', 'O');
    await delta.checkpoint({ layerDir: join(f.root, 'l2') });
    expect(await delta.lookup('/gone.txt')).toBeNull();
    expect(await names(delta, '/')).not.toContain('gone.txt');
    expect(await names(delta, '/d/sub')).toEqual([]);
    await expect(delta.unlink('/gone.txt')).rejects.toMatchObject({ errnoName: 'ENOENT' });
    // An empty merged directory whose codebase entries lie in an older layer's whiteouts goes.
    await delta.rmdir('/d/sub');
    expect(await names(delta, '/d')).toEqual(['x']);
  });

  it('links and symlinks across layers: a link copies up first, the frozen file never gains a name', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await write(delta, '/f', 'F1');
    await delta.symlink('f', '/ln');
    await delta.checkpoint({ layerDir: join(f.root, 'l1') });
    const frozen = join(f.root, 'l1', 'upper', 'f');
    await delta.link('/f', '/hard');
    await delta.link('/keep.txt', '/hard2');
    expect(await read(delta, '/hard')).toBe('F1');
    expect(await read(delta, '/hard2')).toBe('K');
    expect((await lstat(frozen)).nlink).toBe(1);
    expect((await delta.lookup('/hard'))?.stat.nlink).toBe(2n);
    // Both names are one file in the writable layer.
    const fh = await delta.openForWrite('/hard', constants.O_WRONLY | constants.O_TRUNC);
    await fh.writeFile('F2');
    await fh.close();
    expect(await read(delta, '/f')).toBe('F2');
    expect(await readFile(frozen, 'utf8')).toBe('F1');
    expect(await delta.readlink('/ln')).toBe('f');
    await delta.rename('/ln', '/ln2');
    expect(await delta.readlink('/ln2')).toBe('f');
    expect(await delta.lookup('/ln')).toBeNull();
  });

  it('refuses rmdir of a directory that is not empty through any layer', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await delta.mkdir('/added', 0o755);
    await write(delta, '/added/f', 'F');
    await delta.unlink('/e/z');
    await delta.checkpoint({ layerDir: join(f.root, 'l1') });
    await expect(delta.rmdir('/added')).rejects.toMatchObject({ errnoName: 'ENOTEMPTY' });
    await expect(delta.rmdir('/d')).rejects.toMatchObject({ errnoName: 'ENOTEMPTY' });
    await delta.rmdir('/e'); // its only codebase entry was whited out in the frozen layer
    await delta.unlink('/added/f');
    await delta.rmdir('/added');
    expect(await delta.lookup('/added')).toBeNull();
    expect(await delta.lookup('/e')).toBeNull();
  });

  it('moves only directories added in the writable layer (EXDEV from below)', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await delta.mkdir('/old', 0o755);
    await write(delta, '/old/f', 'F');
    await delta.checkpoint({ layerDir: join(f.root, 'l1') });
    await expect(delta.rename('/old', '/moved')).rejects.toMatchObject({ errnoName: 'EXDEV' });
    await delta.mkdir('/fresh', 0o755);
    await write(delta, '/fresh/g', 'G');
    await delta.rename('/fresh', '/moved');
    expect(await names(delta, '/moved')).toEqual(['g']);
    await delta.rename('/old/f', '/old/f2'); // a file from below: copy-up, rename, whiteout
    expect(await names(delta, '/old')).toEqual(['f2']);
  });

  it('refuses a layer directory that exists, is inside the delta or the codebase', async () => {
    const f = await fixture(CODEBASE);
    for (const [layerDir, errnoName] of [
      [f.lower, 'EEXIST'],
      [join(f.deltaDir, 'meta', 'l'), 'EINVAL'],
      [join(f.lower, 'l'), 'EINVAL'],
      [join(f.root, 'no', 'l'), 'ENOENT'],
    ] as const) {
      await expect(f.delta.checkpoint({ layerDir })).rejects.toMatchObject({ errnoName });
    }
    expect(f.delta.frozenLayers).toEqual([]);
  });

  it('waits for an unfinished commit to be finished or discarded (EBUSY)', async () => {
    const f = await fixture(CODEBASE);
    await write(f.delta, '/a.txt', 'mine');
    const stop = new AbortController();
    stop.abort(new Error('stopping'));
    await f.delta.commit({ mode: 'detect-conflicts', signal: stop.signal });
    await expect(f.delta.checkpoint({ layerDir: join(f.root, 'l1') })).rejects.toMatchObject({
      errnoName: 'EBUSY',
    });
    await f.delta.commit({ mode: 'detect-conflicts', paths: [] });
    await f.delta.checkpoint({ layerDir: join(f.root, 'l1') });
    expect(f.delta.frozenLayers).toEqual([join(f.root, 'l1')]);
  });
});

describe('Delta.restore', () => {
  it('shows exactly a checkpoint state again; [] shows the codebase', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    const codebase = await viewOf(delta);
    await write(delta, '/a.txt', 'one');
    await delta.unlink('/gone.txt');
    await delta.mkdir('/new', 0o755);
    const l1 = join(f.root, 'l1');
    const at1 = await viewOf(delta);
    await delta.checkpoint({ layerDir: l1 });
    await write(delta, '/a.txt', 'two');
    await delta.unlink('/keep.txt');
    await delta.rmdir('/new');
    await write(delta, '/gone.txt', 'back');
    const l2 = join(f.root, 'l2');
    const at2 = await viewOf(delta);
    await delta.checkpoint({ layerDir: l2 });
    await write(delta, '/later', 'L');
    await delta.unlink('/a.txt');

    await delta.restore({ frozen: [l1] });
    expect(delta.frozenLayers).toEqual([l1]);
    expect(await viewOf(delta)).toEqual(at1);
    await write(delta, '/after', 'x');
    await delta.restore({ frozen: [] });
    expect(await viewOf(delta)).toEqual(codebase);
    expect(await delta.changes()).toEqual([]);
    await delta.restore({ frozen: [l1, l2] });
    expect(await viewOf(delta)).toEqual(at2);
  });

  it('refuses a directory that is no frozen layer, and changes nothing', async () => {
    const f = await fixture(CODEBASE);
    await write(f.delta, '/w', 'W');
    const other = join(f.root, 'other');
    await (await f.open(other)).close();
    await expect(f.delta.restore({ frozen: [other] })).rejects.toThrow(/not a frozen layer/);
    // The delta's own directory has a layer's shape: it must never become one.
    await expect(f.delta.restore({ frozen: [f.deltaDir] })).rejects.toMatchObject({ errnoName: 'EINVAL' });
    await expect(f.delta.restore({ frozen: [join(f.root, 'none')] })).rejects.toMatchObject({
      errnoName: 'ENOENT',
    });
    await mkdir(join(f.root, 'd3'));
    await expect(
      Delta.open({ lowerDir: f.lower, deltaDir: join(f.root, 'd3'), frozen: [f.deltaDir] }),
    ).rejects.toMatchObject({ errnoName: 'EINVAL' });
    expect(await read(f.delta, '/w')).toBe('W');
    expect(f.delta.frozenLayers).toEqual([]);
  });
});

describe('a delta with frozen layers', () => {
  it('is the plain delta without them: the layer below is the codebase HostDir itself', async () => {
    const f = await fixture(CODEBASE);
    const ctxOf = (d: Delta): DeltaContext => (d as unknown as { ctx: DeltaContext }).ctx;
    expect(ctxOf(f.delta).lower).toBe(ctxOf(f.delta).codebase);
    await f.delta.checkpoint({ layerDir: join(f.root, 'l1') });
    expect(ctxOf(f.delta).lower).not.toBe(ctxOf(f.delta).codebase);
    await f.delta.restore({ frozen: [] });
    expect(ctxOf(f.delta).lower).toBe(ctxOf(f.delta).codebase);
  });

  it('reopens (no close) with its stack, and checks a stack it is given', async () => {
    const f = await fixture(CODEBASE);
    await write(f.delta, '/a.txt', 'one');
    await f.delta.unlink('/gone.txt');
    const frozenView = await viewOf(f.delta);
    const l1 = join(f.root, 'l1');
    await f.delta.checkpoint({ layerDir: l1 });
    await f.delta.unlink('/keep.txt');
    const view = await viewOf(f.delta);

    const again = await f.open();
    expect(again.frozenLayers).toEqual([l1]);
    expect(await viewOf(again)).toEqual(view);
    const given = await Delta.open({ lowerDir: f.lower, deltaDir: f.deltaDir, frozen: [l1] });
    await given.close();
    await expect(Delta.open({ lowerDir: f.lower, deltaDir: f.deltaDir, frozen: [] })).rejects.toThrow(
      new RegExp(`made over the frozen layers \\[${l1}\\], not the ones given \\[\\]`),
    );
    // A new delta (empty writable layer) takes the stack it is given and records it.
    const fresh = await f.open(join(f.root, 'delta2'));
    await fresh.close();
    const started = await Delta.open({ lowerDir: f.lower, deltaDir: join(f.root, 'delta2'), frozen: [l1] });
    expect(await viewOf(started)).toEqual(frozenView);
    await started.close();
    const reopened = await f.open(join(f.root, 'delta2'));
    expect(reopened.frozenLayers).toEqual([l1]);
    // Once recorded, a stack changes by a checkpoint or a restore only, empty writable layer or not.
    await expect(
      Delta.open({ lowerDir: f.lower, deltaDir: join(f.root, 'delta2'), frozen: [] }),
    ).rejects.toThrow(/made over the frozen layers/);
  });

  it('keeps its frozen layers through a discard of everything, which empties the writable layer', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await write(delta, '/a.txt', 'one');
    await delta.checkpoint({ layerDir: join(f.root, 'l1') });
    await write(delta, '/a.txt', 'two');
    await delta.discard();
    expect(await read(delta, '/a.txt')).toBe('one');
    expect(await readdir(join(f.deltaDir, 'upper'))).toEqual([]);
    expect(delta.frozenLayers).toEqual([join(f.root, 'l1')]);
  });

  it('charges the writable layer only: its quota starts from zero after a checkpoint', async () => {
    const f = await fixture({});
    await write(f.delta, '/big', 'x'.repeat(600_000));
    // Counted from the upper tree when a delta opens (writes are charged by the FUSE layer's write path).
    const delta = await Delta.open({ lowerDir: f.lower, deltaDir: f.deltaDir, diskQuotaBytes: 1 << 20 });
    try {
      await delta.quota?.whenReady();
      expect(delta.quota?.used).toBeGreaterThan(600_000);
      await delta.checkpoint({ layerDir: join(f.root, 'l1') });
      await delta.quota?.whenReady();
      expect(delta.quota?.used).toBeLessThan(64 * 1024);
      expect(await read(delta, '/big')).toHaveLength(600_000);
    } finally {
      await delta.close();
    }
  });

  it('never writes a frozen layer again, whatever the writable layer does', async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await write(delta, '/a.txt', 'one');
    await delta.mkdir('/dir', 0o755);
    await write(delta, '/dir/f', 'F');
    await delta.symlink('a.txt', '/ln');
    await delta.unlink('/gone.txt');
    await write(delta, '/d/sub/more', 'M');
    const l1 = join(f.root, 'l1');
    await delta.checkpoint({ layerDir: l1 });
    const frozen = await hostState(l1);
    const meta = await layerMeta(l1);

    for (const round of [1, 2, 3]) {
      await write(delta, '/a.txt', `round ${String(round)}`);
      await delta.setattr('/dir/f', { mode: 0o600, mtime: 5n, atime: 5n });
      await delta.setattr('/dir', { mode: 0o700 });
      await delta.link('/dir/f', `/dir/link${String(round)}`);
      await delta.rename('/ln', '/ln-moved');
      await delta.rename('/ln-moved', '/ln');
      await delta.unlink('/d/sub/more');
      await write(delta, '/d/sub/more', 'again');
      await delta.rename('/a.txt', '/b.txt', {});
      await delta.rename('/b.txt', '/a.txt');
      const fh = await delta.openForWrite('/dir/f', constants.O_WRONLY | constants.O_APPEND);
      await fh.writeFile('+');
      await fh.close();
      await delta.checkpoint({ layerDir: join(f.root, `l${String(round + 1)}`) });
      await delta.restore({ frozen: [l1] });
      await delta.discard();
    }
    expect(await hostState(l1)).toEqual(frozen);
    expect(await layerMeta(l1)).toEqual(meta);
    expect(await read(delta, '/dir/f')).toBe('F');
  });
});
