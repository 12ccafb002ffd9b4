// rename and link semantics of the overlay.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { fixture, names, read, write } from './fixture.js';

describe('Delta rename', () => {
  it('moves a lower file: copy-up, rename in upper, whiteout at the old path', async () => {
    const f = await fixture({ 'a.txt': 'A', 'd/': '' });
    await f.delta.rename('/a.txt', '/d/b.txt');
    expect(await f.delta.lookup('/a.txt')).toBeNull();
    expect(await read(f.delta, '/d/b.txt')).toBe('A');
    expect(await readFile(join(f.lower, 'a.txt'), 'utf8')).toBe('A');
    expect(await f.delta.changes()).toEqual([
      { path: '/a.txt', kind: 'deleted', type: 'file', size: null },
      { path: '/d/b.txt', kind: 'added', type: 'file', size: 1, mode: 0o644 },
    ]);
  });

  it('replaces an existing lower file, and honours noReplace', async () => {
    const f = await fixture({ a: 'A', b: 'B' });
    await expect(f.delta.rename('/a', '/b', { noReplace: true })).rejects.toMatchObject({
      errnoName: 'EEXIST',
    });
    await f.delta.rename('/a', '/b');
    expect(await read(f.delta, '/b')).toBe('A');
    expect(await names(f.delta, '/')).toEqual(['b']);
    expect(await f.delta.changes()).toEqual([
      { path: '/a', kind: 'deleted', type: 'file', size: null },
      { path: '/b', kind: 'modified', type: 'file', size: 1, mode: 0o644, oldMode: 0o644 },
    ]);
    // Renaming back restores a file at /a (a replacement of the deleted codebase entry).
    await f.delta.rename('/b', '/a');
    expect(await read(f.delta, '/a')).toBe('A');
    expect(await f.delta.lookup('/b')).toBeNull();
  });

  it('exchanges two files', async () => {
    const f = await fixture({ a: 'A' });
    await write(f.delta, '/b', 'B');
    await f.delta.rename('/a', '/b', { exchange: true });
    expect(await read(f.delta, '/a')).toBe('B');
    expect(await read(f.delta, '/b')).toBe('A');
  });

  it('returns EXDEV for a directory with codebase content, moves an added one', async () => {
    const f = await fixture({ 'lowdir/x': 'x' });
    await expect(f.delta.rename('/lowdir', '/moved')).rejects.toMatchObject({ errnoName: 'EXDEV' });
    await f.delta.mkdir('/new', 0o755);
    await write(f.delta, '/new/f', 'F');
    await f.delta.mkdir('/new/sub', 0o755);
    await f.delta.rename('/new', '/renamed');
    expect(await f.delta.lookup('/new')).toBeNull();
    expect(await names(f.delta, '/renamed')).toEqual(['f', 'sub']);
    expect((await f.delta.changes()).map((c) => `${c.kind} ${c.path}`)).toEqual([
      'added /renamed',
      'added /renamed/f',
      'added /renamed/sub',
    ]);
  });

  it('asks `refuse` about every entry below an added directory, and moves nothing it refuses', async () => {
    const f = await fixture({});
    await f.delta.mkdir('/new', 0o755);
    await f.delta.mkdir('/new/a', 0o755);
    await f.delta.mkdir('/new/a/b', 0o755);
    await write(f.delta, '/new/a/b/deep.key', 'K');
    await write(f.delta, '/new/top', 'T');
    const asked: string[] = [];
    const refuse = (path: string): boolean => {
      asked.push(path);
      return path.endsWith('.key');
    };
    await expect(f.delta.rename('/new', '/moved', { refuse })).rejects.toMatchObject({ errnoName: 'EACCES' });
    expect(asked).toContain('/new/a/b/deep.key');
    expect(await names(f.delta, '/new/a/b')).toEqual(['deep.key']);
    expect(await f.delta.lookup('/moved')).toBeNull();
    // Nothing refused: the whole tree moves.
    await f.delta.rename('/new', '/moved', { refuse: () => false });
    expect(await read(f.delta, '/moved/a/b/deep.key')).toBe('K');
  });

  it('moves an added directory over an emptied codebase directory (opaque)', async () => {
    const f = await fixture({ 'old/x': 'x' });
    await f.delta.unlink('/old/x');
    await f.delta.mkdir('/new', 0o755);
    await write(f.delta, '/new/y', 'y');
    await f.delta.rename('/new', '/old');
    expect(await names(f.delta, '/old')).toEqual(['y']);
    const result = await f.delta.commit({ mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect(await readFile(join(f.lower, 'old/y'), 'utf8')).toBe('y');
    await expect(stat(join(f.lower, 'old/x'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses type mismatches and moving a directory into itself', async () => {
    const f = await fixture({ f: '1', 'd/': '' });
    await f.delta.mkdir('/e', 0o755);
    await expect(f.delta.rename('/f', '/d')).rejects.toMatchObject({ errnoName: 'EISDIR' });
    await expect(f.delta.rename('/e', '/f')).rejects.toMatchObject({ errnoName: 'ENOTDIR' });
    await expect(f.delta.rename('/e', '/e/inner')).rejects.toMatchObject({ errnoName: 'EINVAL' });
    await expect(f.delta.rename('/missing', '/x')).rejects.toMatchObject({ errnoName: 'ENOENT' });
  });
});

describe('Delta link', () => {
  it('copies up first: the lower inode never gains a link', async () => {
    const f = await fixture({ a: 'A' });
    const before = await stat(join(f.lower, 'a'));
    await f.delta.link('/a', '/b');
    expect((await stat(join(f.lower, 'a'))).nlink).toBe(before.nlink);
    const a = await f.delta.lookup('/a');
    const b = await f.delta.lookup('/b');
    expect(a?.layer).toBe('upper');
    expect(b?.upper).toEqual(a?.upper);
    expect(b?.stat.nlink).toBe(2n);
    await write(f.delta, '/b', 'changed');
    expect(await read(f.delta, '/a')).toBe('changed');
    expect(await readFile(join(f.lower, 'a'), 'utf8')).toBe('A');
    await expect(f.delta.link('/a', '/b')).rejects.toMatchObject({ errnoName: 'EEXIST' });
  });
});
