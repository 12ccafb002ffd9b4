// contract §3 overlay rules: reads see the delta first, writes/creates/deletes change only the delta.
import { constants } from 'node:fs';
import { chmod, readdir, readFile, stat, symlink, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { fixture, names, read, write } from './fixture.js';

describe('Delta overlay', () => {
  it('serves lower files and hides nothing by default', async () => {
    const f = await fixture({ 'src/a.txt': 'A', README: 'r' });
    expect(await names(f.delta, '/')).toEqual(['README', 'src']);
    const found = await f.delta.lookup('/src/a.txt');
    expect(found?.layer).toBe('lower');
    expect(found?.type).toBe('file');
    expect(found?.lower).not.toBeNull();
    expect(await read(f.delta, '/src/a.txt')).toBe('A');
    expect(await f.delta.lookup('/nope')).toBeNull();
    expect((await f.delta.lookup('/'))?.type).toBe('directory');
  });

  it('copy-up on write preserves content, mode and mtime and leaves lower untouched', async () => {
    const f = await fixture({ 'src/a.txt': 'hello\n' });
    const lowerFile = join(f.lower, 'src/a.txt');
    await utimes(lowerFile, 1_000_000, 1_500_000);
    await chmod(lowerFile, 0o751);
    const before = await stat(lowerFile);
    const fh = await f.delta.openForWrite('/src/a.txt', constants.O_WRONLY | constants.O_APPEND);
    const up = await f.delta.lookup('/src/a.txt');
    expect(up?.layer).toBe('upper');
    expect(Number(up?.stat.mode) & 0o7777).toBe(0o751);
    expect(Number(up?.stat.mtimeNs) / 1e6).toBeCloseTo(before.mtimeMs, 0);
    // Inode stability: the upper entry reports the codebase identity it came from.
    expect(up?.lower?.ino).toBe(BigInt(before.ino));
    await fh.write('more\n');
    await fh.close();
    expect(await read(f.delta, '/src/a.txt')).toBe('hello\nmore\n');
    expect(await readFile(lowerFile, 'utf8')).toBe('hello\n');
    expect((await stat(lowerFile)).mtimeMs).toBe(before.mtimeMs);
  });

  it('O_TRUNC copy-up skips the content', async () => {
    const f = await fixture({ big: 'x'.repeat(100_000) });
    const fh = await f.delta.openForWrite('/big', constants.O_WRONLY | constants.O_TRUNC);
    await fh.close();
    expect((await f.delta.lookup('/big'))?.stat.size).toBe(0n);
  });

  it('creates files, dirs, symlinks and FIFOs only in the delta', async () => {
    const f = await fixture({ 'src/': '' });
    await write(f.delta, '/src/new.txt', 'N', 0o600);
    await f.delta.mkdir('/src/d', 0o750);
    await f.delta.symlink('/etc/passwd', '/src/l');
    await f.delta.mknod('/src/p', 0o010644);
    expect(await names(f.delta, '/src')).toEqual(['d', 'l', 'new.txt', 'p']);
    expect(Number((await f.delta.lookup('/src/new.txt'))?.stat.mode) & 0o777).toBe(0o600);
    expect(Number((await f.delta.lookup('/src/d'))?.stat.mode) & 0o777).toBe(0o750);
    expect((await f.delta.lookup('/src/p'))?.type).toBe('fifo');
    expect(await f.delta.readlink('/src/l')).toBe('/etc/passwd');
    expect(await readdir(join(f.lower, 'src'))).toEqual([]);
    await expect(f.delta.create('/src/new.txt', 0o644, constants.O_WRONLY)).rejects.toMatchObject({
      errnoName: 'EEXIST',
    });
    await expect(f.delta.create('/missing/x', 0o644)).rejects.toMatchObject({ errnoName: 'ENOENT' });
    // Device nodes are inert metadata in the root-only upper tree; other types have their own calls.
    await f.delta.mknod('/src/dev', 0o020644, 0x0103);
    expect((await f.delta.lookup('/src/dev'))?.stat.isCharacterDevice()).toBe(true);
    await expect(f.delta.mknod('/src/sock', 0o140644)).rejects.toMatchObject({ errnoName: 'EPERM' });
  });

  it('unlink of a lower file is a whiteout; recreating replaces it', async () => {
    const f = await fixture({ 'a.txt': 'old' });
    await f.delta.unlink('/a.txt');
    expect(await f.delta.lookup('/a.txt')).toBeNull();
    expect(await names(f.delta, '/')).toEqual([]);
    await expect(f.delta.openForRead('/a.txt')).rejects.toMatchObject({ errnoName: 'ENOENT' });
    expect(await readFile(join(f.lower, 'a.txt'), 'utf8')).toBe('old');
    await write(f.delta, '/a.txt', 'new');
    expect(await read(f.delta, '/a.txt')).toBe('new');
    expect(await f.delta.changes()).toEqual([
      { path: '/a.txt', kind: 'modified', type: 'file', size: 3, mode: 0o644, oldMode: 0o644 },
    ]);
  });

  it('rmdir + mkdir gives an opaque directory that starts empty', async () => {
    const f = await fixture({ 'd/x': '1', 'd/sub/y': '2' });
    await f.delta.unlink('/d/sub/y');
    await f.delta.rmdir('/d/sub');
    await f.delta.unlink('/d/x');
    await f.delta.rmdir('/d');
    expect(await f.delta.lookup('/d')).toBeNull();
    await f.delta.mkdir('/d', 0o755);
    expect(await names(f.delta, '/d')).toEqual([]);
    expect(await f.delta.lookup('/d/x')).toBeNull();
    await write(f.delta, '/d/z', 'z');
    expect(await names(f.delta, '/d')).toEqual(['z']);
  });

  it('rmdir refuses a directory with any lower entry, hidden ones included', async () => {
    const f = await fixture({ 'd/secret.key': 'k', 'e/': '' });
    await expect(f.delta.rmdir('/d')).rejects.toMatchObject({ errnoName: 'ENOTEMPTY' });
    expect(await names(f.delta, '/d')).toEqual(['secret.key']);
    await write(f.delta, '/e/new', 'n');
    await expect(f.delta.rmdir('/e')).rejects.toMatchObject({ errnoName: 'ENOTEMPTY' });
    await expect(f.delta.rmdir('/e/new')).rejects.toMatchObject({ errnoName: 'ENOTDIR' });
    await expect(f.delta.unlink('/e')).rejects.toMatchObject({ errnoName: 'EISDIR' });
    await f.delta.rmdir('/e').catch(() => undefined);
    await f.delta.unlink('/e/new');
    await f.delta.rmdir('/e');
    expect(await f.delta.lookup('/e')).toBeNull();
  });

  it('a file named like a whiteout or like metadata is ordinary', async () => {
    const f = await fixture({ foo: 'F', 'd/x': 'X' });
    for (const name of [
      '.wh.foo',
      '.wh..wh..opq',
      'journal-0.jsonl',
      'snapshot.json',
      'meta',
      'upper',
      'work',
    ]) {
      await write(f.delta, `/${name}`, 'agent');
    }
    await write(f.delta, '/d/.wh.x', 'agent');
    await write(f.delta, '/d/.wh..wh..opq', 'agent');
    expect(await read(f.delta, '/foo')).toBe('F');
    expect(await names(f.delta, '/d')).toEqual(['.wh..wh..opq', '.wh.x', 'x']);
    expect(await read(f.delta, '/d/x')).toBe('X');
    const kinds = (await f.delta.changes()).map((c) => c.kind);
    expect(kinds.every((k) => k === 'added')).toBe(true);
    const result = await f.delta.commit({ mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect(await readFile(join(f.lower, 'foo'), 'utf8')).toBe('F');
    expect(await readFile(join(f.lower, 'd/x'), 'utf8')).toBe('X');
    expect(await readFile(join(f.lower, '.wh.foo'), 'utf8')).toBe('agent');
  });

  it('setattr copies up and changes mode, size and times', async () => {
    const f = await fixture({ a: 'abcdef', 'd/': '' });
    await f.delta.setattr('/a', {
      mode: 0o600,
      size: 3,
      mtime: 2_000_000_000_123n,
      atime: 1_000_000_000_000n,
    });
    const st = (await f.delta.lookup('/a'))?.stat;
    expect(Number(st?.mode) & 0o777).toBe(0o600);
    expect(st?.size).toBe(3n);
    expect(st?.mtimeNs).toBe(2_000_000_000_123n); // exact to the nanosecond
    expect(await read(f.delta, '/a')).toBe('abc');
    await f.delta.setattr('/d', { mode: 0o700 });
    expect(Number((await f.delta.lookup('/d'))?.stat.mode) & 0o777).toBe(0o700);
    expect((await stat(join(f.lower, 'd'))).mode & 0o777).not.toBe(0o700);
  });

  it('two deltas over one lower dir are isolated', async () => {
    const f = await fixture({ 'shared.txt': 'base' });
    const other = await f.open(join(f.root, 'delta2'));
    await write(f.delta, '/shared.txt', 'mine');
    await write(f.delta, '/only-mine', 'x');
    await other.unlink('/shared.txt');
    expect(await read(f.delta, '/shared.txt')).toBe('mine');
    expect(await other.lookup('/shared.txt')).toBeNull();
    expect(await other.lookup('/only-mine')).toBeNull();
    expect(await names(f.delta, '/')).toEqual(['only-mine', 'shared.txt']);
  });

  it('never follows a symlink planted in the lower dir', async () => {
    const f = await fixture({});
    await symlink('/etc', join(f.lower, 'a'));
    expect((await f.delta.lookup('/a'))?.type).toBe('symlink');
    expect(await f.delta.lookup('/a/passwd')).toBeNull();
    await expect(f.delta.openForRead('/a/passwd')).rejects.toMatchObject({ errnoName: 'ENOENT' });
    await expect(f.delta.openForWrite('/a', constants.O_WRONLY)).rejects.toMatchObject({
      errnoName: 'ELOOP',
    });
    await expect(f.delta.create('/a/evil', 0o644)).rejects.toMatchObject({ errnoName: 'ENOTDIR' });
  });
});
