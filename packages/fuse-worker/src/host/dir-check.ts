// Whether a directory fd we hold is still the directory a name leads to (DirFdCache's stillCurrent).
import { fstatSync, lstatSync } from 'node:fs';
import { fdPath } from './flags.js';

/**
 * True when `name`, looked up from directory fd `parentFd` without following a symlink, is a directory
 * with the same device and inode as `fd`. A renamed-over, removed or symlinked name fails. Two synchronous
 * stats, against a thread-pool open and close (plus a walk) to re-open the directory.
 */
export function dirStillAt(parentFd: number, name: string, fd: number): boolean {
  try {
    const named = lstatSync(`${fdPath(parentFd)}/${name}`, { bigint: true, throwIfNoEntry: false });
    if (named === undefined || !named.isDirectory()) return false;
    const held = fstatSync(fd, { bigint: true });
    return named.ino === held.ino && named.dev === held.dev;
  } catch {
    return false;
  }
}
