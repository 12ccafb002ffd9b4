// Commit and discard: applied changes, conflicts, last-writer-wins, symlinks, special files.
import {
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rename,
  stat,
  symlink,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { fixture, names, read, write } from './fixture.js';

describe('Delta commit', () => {
  it('commits files whose names are as long as a name may be (255 bytes), added and modified', async () => {
    // The temporary copy once carried the whole name plus a suffix: past 219 bytes, ENAMETOOLONG.
    const long = 'n'.repeat(251) + '.txt';
    const utf8 = 'é'.repeat(125) + '.txt'; // 254 bytes
    const f = await fixture({ [utf8]: 'old' });
    await write(f.delta, `/${long}`, 'long');
    await write(f.delta, `/${utf8}`, 'new');
    const result = await f.delta.commit({ mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect(result.applied.map((c) => `${c.kind} ${c.path}`).sort()).toEqual(
      [`added /${long}`, `modified /${utf8}`].sort(),
    );
    expect(await readFile(join(f.lower, long), 'utf8')).toBe('long');
    expect(await readFile(join(f.lower, utf8), 'utf8')).toBe('new');
    expect((await readdir(f.lower)).sort()).toEqual([long, utf8].sort());
  });

  it('applies adds, modifications, deletions, dirs and modes, and leaves the delta empty', async () => {
    const f = await fixture({ 'mod.txt': 'm', 'del.txt': 'd', 'old/x': 'x', keep: 'k' });
    await write(f.delta, '/mod.txt', 'modified');
    await f.delta.setattr('/mod.txt', { mode: 0o600 });
    await f.delta.unlink('/del.txt');
    await f.delta.unlink('/old/x');
    await f.delta.rmdir('/old');
    await f.delta.mkdir('/new', 0o750);
    await write(f.delta, '/new/deep.txt', 'deep', 0o640);
    const result = await f.delta.commit({ mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect(result.applied.map((c) => `${c.kind} ${c.path}`)).toEqual([
      'deleted /old/x',
      'deleted /del.txt',
      'deleted /old',
      'modified /mod.txt',
      'added /new',
      'added /new/deep.txt',
    ]);
    expect(await readFile(join(f.lower, 'mod.txt'), 'utf8')).toBe('modified');
    expect((await stat(join(f.lower, 'mod.txt'))).mode & 0o777).toBe(0o600);
    expect((await stat(join(f.lower, 'new'))).mode & 0o777).toBe(0o750);
    expect((await stat(join(f.lower, 'new/deep.txt'))).mode & 0o777).toBe(0o640);
    await expect(lstat(join(f.lower, 'del.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(lstat(join(f.lower, 'old'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await f.delta.changes()).toEqual([]);
    expect(await names(f.delta, '/')).toEqual(['keep', 'mod.txt', 'new']);
    expect(await read(f.delta, '/new/deep.txt')).toBe('deep');
    // Nothing left in the delta's upper tree, no leftover temp files in the codebase.
    expect(await readdir(join(f.deltaDir, 'upper'))).toEqual([]);
    expect((await readdir(f.lower)).sort()).toEqual(['keep', 'mod.txt', 'new']);
  });

  it('reports conflicts and keeps them in the delta; last-writer-wins overwrites', async () => {
    const f = await fixture({ 'a.txt': 'base', 'b.txt': 'base' });
    await write(f.delta, '/a.txt', 'sandbox');
    await write(f.delta, '/c.txt', 'sandbox add');
    await f.delta.unlink('/b.txt');
    // Someone else changes the codebase meanwhile.
    await writeFile(join(f.lower, 'a.txt'), 'other writer');
    await writeFile(join(f.lower, 'c.txt'), 'other add');
    await writeFile(join(f.lower, 'b.txt'), 'other edit');
    const detect = await f.delta.commit({ mode: 'detect-conflicts' });
    expect(detect.applied).toEqual([]);
    expect(detect.conflicts.map((c) => c.path)).toEqual(['/b.txt', '/a.txt', '/c.txt']);
    expect(await readFile(join(f.lower, 'a.txt'), 'utf8')).toBe('other writer');
    expect(await f.delta.changes()).toHaveLength(3);
    const lww = await f.delta.commit({ mode: 'last-writer-wins' });
    expect(lww.conflicts).toEqual([]);
    expect(lww.applied).toHaveLength(3);
    expect(await readFile(join(f.lower, 'a.txt'), 'utf8')).toBe('sandbox');
    expect(await readFile(join(f.lower, 'c.txt'), 'utf8')).toBe('sandbox add');
    await expect(lstat(join(f.lower, 'b.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await f.delta.changes()).toEqual([]);
  });

  it('detects a file that vanished from the codebase', async () => {
    const f = await fixture({ 'a.txt': 'base' });
    await write(f.delta, '/a.txt', 'sandbox');
    await unlink(join(f.lower, 'a.txt'));
    const result = await f.delta.commit({ mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([
      { path: '/a.txt', reason: expect.stringContaining('deleted') as unknown },
    ]);
  });

  it('refuses a change below a symlink in the codebase path, in every mode', async () => {
    const f = await fixture({ 'd/f': 'base' });
    await write(f.delta, '/d/f', 'sandbox');
    const outside = join(f.root, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'f'), 'outside');
    await rename(join(f.lower, 'd'), join(f.root, 'd-moved'));
    await symlink(outside, join(f.lower, 'd'));
    for (const mode of ['detect-conflicts', 'last-writer-wins'] as const) {
      const result = await f.delta.commit({ mode });
      expect(result.applied).toEqual([]);
      expect(result.conflicts).toEqual([
        { path: '/d/f', reason: expect.stringContaining('symlink') as unknown },
      ]);
    }
    expect(await readFile(join(outside, 'f'), 'utf8')).toBe('outside');
  });

  it('commits a sandbox symlink as a symlink, never following it', async () => {
    const f = await fixture({});
    const victim = join(f.root, 'victim');
    await writeFile(victim, 'precious');
    await f.delta.symlink(victim, '/link');
    const result = await f.delta.commit({ mode: 'detect-conflicts' });
    expect(result.applied).toEqual([
      { path: '/link', kind: 'added', type: 'symlink', size: victim.length, target: victim },
    ]);
    expect((await lstat(join(f.lower, 'link'))).isSymbolicLink()).toBe(true);
    expect(await readlink(join(f.lower, 'link'))).toBe(victim);
    expect(await readFile(victim, 'utf8')).toBe('precious');
  });

  it('replaces a codebase symlink by writing through the delta without touching its target', async () => {
    const f = await fixture({});
    const victim = join(f.root, 'victim');
    await writeFile(victim, 'precious');
    await symlink(victim, join(f.lower, 'l'));
    await f.delta.unlink('/l');
    await write(f.delta, '/l', 'file now');
    const result = await f.delta.commit({ mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect((await lstat(join(f.lower, 'l'))).isFile()).toBe(true);
    expect(await readFile(victim, 'utf8')).toBe('precious');
  });

  it('never syncs FIFOs back: skipped and kept', async () => {
    const f = await fixture({});
    await f.delta.mknod('/pipe', 0o010644);
    await write(f.delta, '/file', 'x');
    const result = await f.delta.commit({ mode: 'detect-conflicts' });
    expect(result.skipped).toEqual([
      { path: '/pipe', reason: 'FIFO: never written to the codebase (kept in the sandbox)' },
    ]);
    expect(result.applied.map((c) => c.path)).toEqual(['/file']);
    await expect(lstat(join(f.lower, 'pipe'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect((await f.delta.lookup('/pipe'))?.type).toBe('fifo');
  });

  it('commits only the given paths', async () => {
    const f = await fixture({});
    await write(f.delta, '/b', '2');
    await f.delta.mkdir('/c', 0o755);
    await write(f.delta, '/c/two', '2');
    const result = await f.delta.commit({ mode: 'detect-conflicts', paths: ['/c/two'] });
    expect(result.applied.map((c) => c.path)).toEqual(['/c/two']);
    expect(await readFile(join(f.lower, 'c/two'), 'utf8')).toBe('2');
    expect((await f.delta.changes()).map((c) => c.path)).toEqual(['/b', '/c']);
    // The directory was created in the codebase as a parent; committing it later is not a conflict.
    expect((await f.delta.commit({ mode: 'detect-conflicts' })).conflicts).toEqual([]);
  });
});

describe('Delta discard', () => {
  it('empties the delta, or only the given paths', async () => {
    const f = await fixture({ a: 'A', b: 'B', 'd/x': 'x' });
    await write(f.delta, '/a', 'changed');
    await f.delta.unlink('/b');
    await f.delta.unlink('/d/x');
    await write(f.delta, '/d/new', 'n');
    await f.delta.discard({ paths: ['/d'] });
    expect(await names(f.delta, '/d')).toEqual(['x']);
    expect((await f.delta.changes()).map((c) => c.path)).toEqual(['/a', '/b']);
    await f.delta.discard();
    expect(await f.delta.changes()).toEqual([]);
    expect(await read(f.delta, '/a')).toBe('A');
    expect(await read(f.delta, '/b')).toBe('B');
  });
});
