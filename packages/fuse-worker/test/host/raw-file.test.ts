// HostDir.openSyncIfCached and RawFile: the synchronous read path of the worker's data ops.
import { constants, fstatSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';

import { HostDir } from '../../src/host/host-dir.js';
import { RawFile } from '../../src/host/raw-file.js';
import { holdThreadPool } from './hold-pool.js';
import { tempRoot } from './tmp-root.js';

async function openRoot(path: string): Promise<HostDir> {
  const dir = await HostDir.open({ path });
  onTestFinished(() => dir.close());
  return dir;
}

describe('HostDir.openSyncIfCached', () => {
  it('opens synchronously once the parent is cached, and only then', async () => {
    const root = await tempRoot();
    await mkdir(join(root, 'sub'));
    await writeFile(join(root, 'sub/f.txt'), 'hello');
    await writeFile(join(root, 'top.txt'), 'top');
    const dir = await openRoot(root);

    // The root is always there; `sub` is not cached before anything walked into it.
    const top = dir.openSyncIfCached('top.txt', constants.O_RDONLY);
    expect(top).toBeTypeOf('number');
    const file = new RawFile(top!);
    onTestFinished(() => file.close());
    const buf = Buffer.alloc(16);
    expect(buf.subarray(0, readSync(file.fd, buf, 0, 16, 0)).toString()).toBe('top');
    expect(dir.openSyncIfCached('sub/f.txt', constants.O_RDONLY)).toBeUndefined();

    await dir.lstat('sub/f.txt'); // walks `sub` and caches its fd, as a FUSE lookup does
    const fd = dir.openSyncIfCached('sub/f.txt', constants.O_RDONLY);
    expect(fd).toBeTypeOf('number');
    const sub = new RawFile(fd!);
    onTestFinished(() => sub.close());
    expect((await sub.read(buf, 0, 16, 0)).bytesRead).toBe(5);
    expect(buf.subarray(0, 5).toString()).toBe('hello');
  });

  it('never follows a final symlink, refuses O_CREAT, and fails like open(2) for a missing name', async () => {
    const root = await tempRoot();
    await symlink('/etc/passwd', join(root, 'l'));
    const dir = await openRoot(root);
    expect(() => dir.openSyncIfCached('l', constants.O_RDONLY)).toThrow(
      expect.objectContaining({ code: 'ELOOP' }),
    );
    expect(() => dir.openSyncIfCached('missing', constants.O_RDONLY)).toThrow(
      expect.objectContaining({ code: 'ENOENT' }),
    );
    expect(dir.openSyncIfCached('new', constants.O_RDWR | constants.O_CREAT)).toBeUndefined();
    expect(() => dir.openSyncIfCached('../escape', constants.O_RDONLY)).toThrow(/invalid relative host path/);
  });
});

describe('RawFile', () => {
  it('reads -1 as soon as close() is called, and releases the number only after reads in flight', async () => {
    const root = await tempRoot();
    await writeFile(join(root, 'f'), Buffer.alloc(1 << 20, 7));
    const fd = openSync(join(root, 'f'), constants.O_RDONLY);
    const file = new RawFile(fd);

    const buffers = Array.from({ length: 8 }, () => Buffer.alloc(1 << 17));
    const reads = buffers.map((b, i) => file.read(b, 0, b.length, i * b.length));
    const closed = file.close();
    expect(file.fd).toBe(-1);
    // The number is still ours while the reads run: the kernel has not reused it.
    expect(fstatSync(fd).size).toBe(1 << 20);
    for (const r of await Promise.all(reads)) expect(r.bytesRead).toBe(1 << 17);
    expect(buffers.every((b) => b.every((x) => x === 7))).toBe(true);
    await closed;
    expect(() => fstatSync(fd)).toThrow(expect.objectContaining({ code: 'EBADF' }));

    await expect(file.read(buffers[0]!, 0, 1, 0)).rejects.toMatchObject({ code: 'EBADF' });
    await expect(file.stat({ bigint: true })).rejects.toMatchObject({ code: 'EBADF' });
    expect(file.close()).toBe(closed); // idempotent
  });

  it('stats and syncs through the same descriptor', async () => {
    const root = await tempRoot();
    await writeFile(join(root, 'f'), 'abc');
    const file = new RawFile(openSync(join(root, 'f'), constants.O_RDONLY));
    onTestFinished(() => file.close());
    expect((await file.stat({ bigint: true })).size).toBe(3n);
    await expect(file.sync()).resolves.toBeUndefined();
    await expect(file.datasync()).resolves.toBeUndefined();
  });

  /** A 1 MiB file, already removed, open in a RawFile; and the pool held until `release()`. */
  async function removedFileWithPoolHeld(): Promise<{
    fd: number;
    file: RawFile;
    release: () => Promise<void>;
  }> {
    const root = await tempRoot();
    const fd = openSync(join(root, 'removed'), constants.O_RDWR | constants.O_CREAT, 0o600);
    writeSync(fd, Buffer.alloc(1 << 20, 1));
    unlinkSync(join(root, 'removed'));
    return { fd, file: new RawFile(fd), release: holdThreadPool(root) };
  }

  it('closes in the thread pool, so a removed file is freed off the JS thread', async () => {
    // Closing the last reference to a removed file frees it inside close(2) (30 ms for 100 MiB written out
    // on ext4): that must not happen on the worker's one JS thread. With every pool thread held, the
    // close cannot run until they are let go: until then the number is still open.
    const { fd, file, release } = await removedFileWithPoolHeld();
    let closed: Promise<void>;
    try {
      closed = file.close();
      expect(file.fd).toBe(-1);
      expect(fstatSync(fd).size).toBe(1 << 20); // still ours: not closed on this thread
    } finally {
      await release();
    }
    await closed;
    expect(() => fstatSync(fd)).toThrow(expect.objectContaining({ code: 'EBADF' }));
  });

  it('truncates in the thread pool too', async () => {
    // Shrinking a big file frees its blocks inside ftruncate(2): the SETATTR of a removed, still open
    // file (attr-ops.ts) must not do that on the JS thread either.
    const { fd, file, release } = await removedFileWithPoolHeld();
    onTestFinished(() => file.close());
    let truncated: Promise<void>;
    try {
      truncated = file.truncate(5);
      expect(fstatSync(fd).size).toBe(1 << 20); // not truncated on this thread
    } finally {
      await release();
    }
    await truncated;
    expect(fstatSync(fd).size).toBe(5);
  });
});
