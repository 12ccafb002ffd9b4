import { constants } from 'node:fs';
import fsp, { mkdir, readFile, rename, stat, symlink, writeFile, lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished, vi } from 'vitest';

import { HostDir } from '../../src/host/host-dir.js';
import { tempRoot } from './tmp-root.js';

async function openRoot(path: string, cacheCapacity?: number): Promise<HostDir> {
  const dir = await HostDir.open({ path, cacheCapacity });
  onTestFinished(() => dir.close());
  return dir;
}

describe('HostDir basics', () => {
  it('creates, reads, lists, renames and removes below the root', async () => {
    const root = await tempRoot();
    const dir = await openRoot(root);
    await dir.mkdir('a', 0o755);
    await dir.mkdir('a/b', 0o755);
    const fh = await dir.open('a/b/f', constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o640);
    await fh.writeFile('hello');
    await fh.close();
    expect(await readFile(join(root, 'a/b/f'), 'utf8')).toBe('hello');
    expect((await dir.lstat('a/b/f')).size).toBe(5n);
    expect(await dir.readdir('a')).toEqual([{ name: 'b', type: 'directory' }]);
    await dir.symlink('../nowhere', 'a/l');
    expect(await dir.readlink('a/l')).toBe('../nowhere');
    await dir.rename('a/b', { dir, rel: 'c' });
    expect(await dir.lstatOrNull('a/b/f')).toBeNull();
    expect((await dir.lstat('c/f')).isFile()).toBe(true);
    await dir.link('c/f', { dir, rel: 'c/g' });
    expect((await dir.lstat('c/f')).nlink).toBe(2n);
    await dir.chmod('c/f', 0o600);
    expect((await stat(join(root, 'c/f'))).mode & 0o777).toBe(0o600);
    await dir.utimes('c/f', 1_000_000_000_000n, 2_000_000_000_001n);
    expect((await stat(join(root, 'c/f'), { bigint: true })).mtimeNs).toBe(2_000_000_000_001n);
    await dir.utimes('a/l', 1_000_000_000n, 3_000_000_000n);
    expect((await lstat(join(root, 'a/l'))).mtimeMs).toBe(3000);
    await dir.truncate('c/f', 2);
    expect(await readFile(join(root, 'c/f'), 'utf8')).toBe('he');
    await dir.removeTree('c');
    expect(await dir.lstatOrNull('c')).toBeNull();
    await dir.unlink('a/l');
    await dir.rmdir('a');
    expect(await dir.readdir('')).toEqual([]);
  });

  it('rejects ., .., empty components and NUL as programming errors', async () => {
    const dir = await openRoot(await tempRoot());
    for (const bad of ['..', 'a/../b', './a', 'a//b', 'a/', '/a', 'a\0b']) {
      await expect(dir.lstat(bad)).rejects.toThrow(TypeError);
    }
  });

  it('creates FIFOs with the requested mode', async () => {
    const root = await tempRoot();
    const dir = await openRoot(root);
    await dir.mkfifo('p', 0o640);
    const st = await lstat(join(root, 'p'));
    expect(st.isFIFO()).toBe(true);
    expect(st.mode & 0o777).toBe(0o640);
  });

  it('keeps the fd cache bounded and correct after renames', async () => {
    const root = await tempRoot();
    const dir = await openRoot(root, 4);
    for (let i = 0; i < 10; i++) {
      await mkdir(join(root, `d${i}/x`), { recursive: true });
      await writeFile(join(root, `d${i}/x/f`), String(i));
    }
    for (let i = 0; i < 10; i++) expect((await dir.lstat(`d${i}/x/f`)).size).toBe(1n);
    expect(dir.cachedDirs).toBeLessThanOrEqual(4);
    await dir.rename('d1', { dir, rel: 'moved' });
    await dir.rename('d2', { dir, rel: 'd1' });
    const fh = await dir.open('d1/x/f', constants.O_RDONLY);
    expect(await fh.readFile('utf8')).toBe('2');
    await fh.close();
  });

  it('an expired cached directory fd is kept while its name still leads to it, re-opened once replaced', async () => {
    const root = await tempRoot();
    await mkdir(join(root, 'a/b'), { recursive: true });
    await writeFile(join(root, 'a/b/f'), 'one');
    await mkdir(join(root, 'elsewhere'));
    await writeFile(join(root, 'elsewhere/f'), 'outside');
    // a negative maximum age: every use of a cached fd comes after its expiry
    const dir = await HostDir.open({ path: root, cacheMaxAgeMs: -1 });
    onTestFinished(() => dir.close());
    expect((await dir.lstat('a/b/f')).size).toBe(3n);
    const opens = vi.spyOn(fsp, 'open');
    onTestFinished(() => opens.mockRestore());
    expect((await dir.lstat('a/b/f')).size).toBe(3n);
    expect(opens).not.toHaveBeenCalled(); // checked, not re-opened
    // replaced behind our back (another worker's commit): the new directory is seen
    await rename(join(root, 'a/b'), join(root, 'a/old'));
    await mkdir(join(root, 'a/b'));
    await writeFile(join(root, 'a/b/f'), 'second');
    expect((await dir.lstat('a/b/f')).size).toBe(6n);
    expect(opens).toHaveBeenCalled();
    // and a symlink put in its place is never followed
    await rename(join(root, 'a/b'), join(root, 'a/old2'));
    await symlink(join(root, 'elsewhere'), join(root, 'a/b'));
    await expect(dir.lstat('a/b/f')).rejects.toThrow(/ELOOP|ENOTDIR/);
  });

  it('renames across two roots on one filesystem', async () => {
    const a = await tempRoot();
    const b = await tempRoot();
    const da = await openRoot(a);
    const db = await openRoot(b);
    await writeFile(join(a, 'f'), 'x');
    await da.rename('f', { dir: db, rel: 'g' });
    expect(await readFile(join(b, 'g'), 'utf8')).toBe('x');
  });

  it('opens never follow a final symlink', async () => {
    const root = await tempRoot();
    await symlink('/etc/passwd', join(root, 'l'));
    const dir = await openRoot(root);
    await expect(dir.open('l', constants.O_RDONLY)).rejects.toMatchObject({ code: 'ELOOP' });
    await expect(dir.open('l', constants.O_WRONLY | constants.O_CREAT, 0o644)).rejects.toMatchObject({
      code: 'ELOOP',
    });
    await expect(dir.chmod('l', 0o777)).rejects.toBeDefined();
    await expect(dir.truncate('l', 0)).rejects.toMatchObject({ code: 'ELOOP' });
  });
});
