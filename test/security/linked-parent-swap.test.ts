// The owner of a linked directory's parent swaps that parent for a symlink (or the directory for another
// one), then a sandbox starts and commits. Followed, the root worker would mount the other directory and
// the commit would write root-owned files there. Defence: the codebase keeps the directory's identity
// (device, inode) from the link; the control plane and the worker open its path without following a
// symlink in any component (fuse-worker host/pinned-dir.ts) and refuse another directory.
import { mkdir, readdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import type { PermissionRule } from '@agentfense/protocol';
import { spawnWorker } from '@agentfense/fuse-worker';
import { assertCleanAndRemove, makeDirs } from '../helpers/control-fixtures.js';

import type { TestDirs } from '../helpers/control-fixtures.js';
import { openRecordsDb } from '../helpers/records-db.js';

const WRITE_ALL: PermissionRule[] = [{ pattern: '**', permission: 'write' }];

let dirs: TestDirs;
let cp: ControlPlane;
/** The user's parent directory of the linked one, and the directory the swap points at instead. */
let parent: string;
let linked: string;
let victim: string;

beforeEach(async () => {
  dirs = await makeDirs({});
  parent = join(dirs.root, 'home', 'proj');
  linked = join(parent, 'repo');
  victim = join(dirs.root, 'victim', 'proj', 'repo');
  await mkdir(linked, { recursive: true });
  await writeFile(join(linked, 'README.md'), 'the linked codebase\n');
  await mkdir(victim, { recursive: true });
  await writeFile(join(victim, 'passwd'), 'root:x:0:0\n');
  cp = await ControlPlane.open({ dataDir: dirs.dataDir, workerPoolSize: 0 });
});

afterEach(async () => {
  for (const sb of (await cp.listSandboxes()).items) await cp.destroySandbox(sb.id);
  await cp.close();
  await assertCleanAndRemove(dirs);
});

/** Swaps the parent of the linked directory for a symlink to the victim's parent. */
async function swapParentForSymlink(): Promise<void> {
  await rename(parent, `${parent}.moved`);
  await symlink(join(dirs.root, 'victim', 'proj'), parent);
}

/** The attack's goal: a file written into the victim directory by a commit. */
async function tryToCommitInto(sandboxId: string): Promise<void> {
  await cp.writeFile(sandboxId, '/planted', 'owned\n').catch(() => undefined);
  await cp.commit(sandboxId).catch(() => undefined);
}

describe('a linked directory reached through a swapped parent', () => {
  it('a parent swapped for a symlink: the start and the commit are refused, the other directory untouched', async () => {
    const { id: codebaseId } = await cp.linkCodebase({ path: linked });
    const { id } = await cp.createSandbox({ codebaseId, rules: WRITE_ALL });
    await swapParentForSymlink();

    const start = cp.startSandbox(id);
    await expect(start).rejects.toMatchObject({ code: 'AF_WRONG_STATE' });
    await expect(start).rejects.toThrow(new RegExp(`codebase ${codebaseId}.*${parent} is a symlink`));
    await expect(start).rejects.toThrow(/link the directory again/i);
    await tryToCommitInto(id);
    expect((await readdir(victim)).sort()).toEqual(['passwd']);
  });

  it('the directory replaced by another one (no symlink anywhere): refused as not the linked directory', async () => {
    const { id: codebaseId } = await cp.linkCodebase({ path: linked });
    const { id } = await cp.createSandbox({ codebaseId, rules: WRITE_ALL });
    await rename(linked, `${linked}.moved`);
    await mkdir(linked);

    const start = cp.startSandbox(id);
    await expect(start).rejects.toMatchObject({ code: 'AF_WRONG_STATE' });
    await expect(start).rejects.toThrow(/is not the directory that was linked.*Link the directory again/);
    await tryToCommitInto(id);
    expect(await readdir(linked)).toEqual([]);
  });

  it('a record linked before identities were kept gets one on its first use, then holds to it', async () => {
    const { id: codebaseId } = await cp.linkCodebase({ path: linked });
    const db = openRecordsDb(dirs.dataDir, { writable: true });
    db.prepare('UPDATE codebases SET host_identity = NULL WHERE id = ?').run(codebaseId);
    db.close();
    const { id } = await cp.createSandbox({ codebaseId, rules: WRITE_ALL });
    await cp.startSandbox(id); // the first use: the directory found now is recorded
    await cp.stopSandbox(id);
    await rename(linked, `${linked}.moved`);
    await mkdir(linked);
    await expect(cp.startSandbox(id)).rejects.toThrow(/is not the directory that was linked/);
  });

  it('the worker itself refuses both (the control plane checks first, but a swap can land in between)', async () => {
    const linkedAt = await stat(linked, { bigint: true });
    const lowerIdentity = { dev: linkedAt.dev.toString(), ino: linkedAt.ino.toString() };
    const mountpoint = join(dirs.root, 'mnt');
    await mkdir(mountpoint);
    const mountOnce = async (): Promise<unknown> => {
      const worker = await spawnWorker({ logFile: join(dirs.root, 'worker.log') });
      try {
        return await worker.mount({
          lowerDir: linked,
          lowerIdentity,
          deltaDir: join(dirs.root, 'delta'),
          mountpoint,
          rules: WRITE_ALL,
        });
      } finally {
        await worker.stop();
      }
    };

    await swapParentForSymlink();
    await expect(mountOnce()).rejects.toThrow(new RegExp(`${parent} is a symlink`));
    expect((await readdir(victim)).sort()).toEqual(['passwd']);

    await rm(parent);
    await rename(`${parent}.moved`, parent);
    await rename(linked, `${linked}.moved`);
    await mkdir(linked);
    const replaced = mountOnce();
    await expect(replaced).rejects.toMatchObject({ code: 'AF_WRONG_STATE' });
    await expect(replaced).rejects.toThrow(/is not the directory that was linked/);
  });
});
