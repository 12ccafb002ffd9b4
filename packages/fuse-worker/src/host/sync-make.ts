// Creates in the delta's upper layer without a thread-pool trip, where the parent's fd is cached (the
// usual case: the kernel looked the name up just before). A trip through libuv's pool costs 30-100 µs here
// and a create took several (docs/decisions.md, "Creating files takes no thread-pool trip where the parent's
// fd is cached"); the syscalls themselves take a few µs. Both never follow a symlink: O_CREAT|O_EXCL fails on
// any existing name, and the new directory is opened with O_NOFOLLOW|O_DIRECTORY to be given its owner and
// mode.
import { closeSync, constants, fchmodSync, fchownSync, mkdirSync, openSync } from 'node:fs';

import type { HostDir } from './host-dir.js';
import { RawFile, type WritableFile } from './raw-file.js';

export interface NewOwner {
  readonly uid: number;
  readonly gid: number;
}

/**
 * Creates regular file `rel` (EEXIST if anything is there), opened with `flags`, owned by `owner` (when
 * given) with `mode` before anyone else can reach it.
 */
export async function createFile(
  dir: HostDir,
  rel: string,
  flags: number,
  mode: number,
  owner: NewOwner | undefined,
): Promise<WritableFile> {
  const exclusive = flags | constants.O_CREAT | constants.O_EXCL;
  const fd = dir.changeSyncIfCached(rel, (at) => openSync(at, exclusive | constants.O_NOFOLLOW, 0o600));
  if (fd !== undefined) {
    try {
      // chown before chmod: a chown clears set-id bits on the host.
      if (owner !== undefined) fchownSync(fd, owner.uid, owner.gid);
      fchmodSync(fd, mode & 0o7777);
    } catch (err) {
      closeSync(fd);
      throw err;
    }
    return new RawFile(fd);
  }
  const fh = await dir.open(rel, exclusive, 0o600);
  try {
    if (owner !== undefined) await fh.chown(owner.uid, owner.gid);
    await fh.chmod(mode & 0o7777);
  } catch (err) {
    await fh.close();
    throw err;
  }
  return fh;
}

/** Makes directory `rel`, owned by `owner` (when given) with `mode` before anyone else can reach it. */
export async function makeDir(
  dir: HostDir,
  rel: string,
  mode: number,
  owner: NewOwner | undefined,
): Promise<void> {
  if (makeDirSync(dir, rel, mode, owner)) return;
  await dir.mkdir(rel, 0o700);
  if (owner !== undefined) await dir.lchown(rel, owner.uid, owner.gid);
  await dir.chmod(rel, mode);
}

/**
 * mkdir(2) of `rel` (0700), then its owner and mode through an fd of its own, so it is never reachable with
 * other ids or bits in between; false on a miss (the caller then takes the asynchronous path).
 */
function makeDirSync(dir: HostDir, rel: string, mode: number, owner: NewOwner | undefined): boolean {
  const fd = dir.changeSyncIfCached(rel, (at) => {
    mkdirSync(at, { mode: 0o700 });
    return openSync(at, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  });
  if (fd === undefined) return false;
  try {
    // chown before chmod: a chown may clear set-id bits.
    if (owner !== undefined) fchownSync(fd, owner.uid, owner.gid);
    fchmodSync(fd, mode & 0o7777);
  } finally {
    closeSync(fd);
  }
  return true;
}
