// Attacks on the host layer: planted symlinks in intermediate components and rename races.
import { constants } from 'node:fs';
import { lstat, mkdir, readFile, rename, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';

import { HostDir } from '../../src/host/host-dir.js';
import { createFile, makeDir } from '../../src/host/sync-make.js';
import { tempRoot } from './tmp-root.js';

async function openRoot(path: string): Promise<HostDir> {
  const dir = await HostDir.open({ path });
  onTestFinished(() => dir.close());
  return dir;
}

describe('HostDir never follows a symlink on the host', () => {
  it('refuses a symlink planted as an intermediate directory', async () => {
    const root = await tempRoot();
    await symlink('/etc', join(root, 'a'));
    const dir = await openRoot(root);
    await expect(dir.open('a/passwd', constants.O_RDONLY)).rejects.toMatchObject({
      code: expect.stringMatching(/^(ENOTDIR|ELOOP)$/) as unknown,
    });
    await expect(dir.lstat('a/passwd')).rejects.toMatchObject({ code: 'ENOTDIR' });
    await expect(dir.readdir('a')).rejects.toMatchObject({ code: 'ENOTDIR' });
    await expect(dir.mkdir('a/x', 0o755)).rejects.toMatchObject({ code: 'ENOTDIR' });
    await expect(dir.unlink('a/passwd')).rejects.toMatchObject({ code: 'ENOTDIR' });
    await expect(dir.rename('a/passwd', { dir, rel: 'stolen' })).rejects.toMatchObject({ code: 'ENOTDIR' });
    await expect(dir.removeTree('a')).resolves.toBeUndefined();
    expect((await stat('/etc/passwd')).isFile()).toBe(true);
  });

  it('does not cache a symlink as a directory when a lookup asks for its fd synchronously', async () => {
    const root = await tempRoot();
    await symlink('/etc', join(root, 'a'));
    await mkdir(join(root, 'real'));
    await writeFile(join(root, 'real/passwd'), 'inside');
    const dir = await openRoot(root);
    dir.cacheDirSync('a');
    expect(dir.cachedDirs).toBe(0);
    expect(dir.lstatIfCached('a/passwd')).toBeUndefined(); // not answered from /etc
    await expect(dir.lstat('a/passwd')).rejects.toMatchObject({ code: 'ENOTDIR' });
    // A real directory is cached, and its names are then answered without a walk.
    dir.cacheDirSync('real');
    expect(dir.cachedDirs).toBe(1);
    expect(dir.lstatIfCached('real/passwd')?.isFile()).toBe(true);
  });

  it('a create or mkdir made synchronously in a cached directory never follows a symlink in its place', async () => {
    const root = await tempRoot();
    const outside = await tempRoot();
    await writeFile(join(outside, 'victim'), 'untouched');
    await mkdir(join(root, 'd'));
    await symlink(join(outside, 'victim'), join(root, 'd/f'));
    await symlink(join(outside, 'made'), join(root, 'd/sub'));
    const dir = await openRoot(root);
    dir.cacheDirSync('d'); // the synchronous path, as after a LOOKUP of d
    expect(dir.cachedDirs).toBe(1);
    const owner = { uid: 65534, gid: 65534 };
    await expect(
      createFile(dir, 'd/f', constants.O_RDWR | constants.O_TRUNC, 0o6755, owner),
    ).rejects.toMatchObject({
      code: 'EEXIST',
    });
    await expect(makeDir(dir, 'd/sub', 0o755, owner)).rejects.toMatchObject({ code: 'EEXIST' });
    expect(await readFile(join(outside, 'victim'), 'utf8')).toBe('untouched');
    const victim = await lstat(join(outside, 'victim'));
    expect([victim.uid, victim.mode & 0o7777]).toEqual([0, 0o644]);
    await expect(lstat(join(outside, 'made'))).rejects.toMatchObject({ code: 'ENOENT' });
    // A free name is made with its owner and mode on the entry itself.
    await (await createFile(dir, 'd/new', constants.O_RDWR, 0o640, owner)).close();
    await makeDir(dir, 'd/newdir', 0o750, owner);
    for (const [name, mode] of [
      ['d/new', 0o640],
      ['d/newdir', 0o750],
    ] as const) {
      const st = await lstat(join(root, name));
      expect([st.uid, st.gid, st.mode & 0o7777]).toEqual([65534, 65534, mode]);
    }
  });

  it('refuses a symlink planted deeper in the tree', async () => {
    const root = await tempRoot();
    await mkdir(join(root, 'x/y'), { recursive: true });
    await symlink('/etc', join(root, 'x/y/z'));
    const dir = await openRoot(root);
    await expect(dir.open('x/y/z/passwd', constants.O_RDONLY)).rejects.toMatchObject({ code: 'ENOTDIR' });
  });

  it('a rename race never lets an open escape the root', async () => {
    const root = await tempRoot();
    await mkdir(join(root, 'dir'));
    await writeFile(join(root, 'dir/passwd'), 'inside');
    await symlink('/etc', join(root, 'link'));
    const inside = await stat(join(root, 'dir/passwd'));
    // Capacity 0: every open walks the path again, so each one races the swapper.
    const dir = await HostDir.open({ path: root, cacheCapacity: 0 });
    onTestFinished(() => dir.close());

    let stop = false;
    let swaps = 0;
    const swapper = (async () => {
      // `dir` alternates between the real directory and a symlink to /etc.
      while (!stop) {
        await rename(join(root, 'dir'), join(root, 'parked'));
        await rename(join(root, 'link'), join(root, 'dir'));
        await rename(join(root, 'dir'), join(root, 'link'));
        await rename(join(root, 'parked'), join(root, 'dir'));
        swaps++;
      }
    })();

    let opened = 0;
    let refused = 0;
    // At least 1.5 s, and on a loaded machine longer, until both outcomes have been seen.
    const start = Date.now();
    try {
      while (Date.now() - start < 1500 || ((opened === 0 || refused === 0) && Date.now() - start < 10_000)) {
        try {
          const fh = await dir.open('dir/passwd', constants.O_RDONLY);
          try {
            const st = await fh.stat();
            expect([st.dev, st.ino]).toEqual([inside.dev, inside.ino]);
            opened++;
          } finally {
            await fh.close();
          }
        } catch (err) {
          if (!['ENOENT', 'ENOTDIR', 'ELOOP'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
          refused++;
        }
      }
    } finally {
      stop = true;
      await swapper;
    }
    expect(swaps).toBeGreaterThan(0);
    expect(opened).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  }, 20_000);
});
