// The host steps of a flatten (flatten.ts), in one object: every step that changes the delta's disk goes
// through it, so a test can make the process "die" before any of them. A frozen layer is only read.
import type { BigIntStats } from 'node:fs';
import { constants } from 'node:fs';
import fsp from 'node:fs/promises';

import { FsError } from '../errors.js';
import { fdPath } from '../host/flags.js';
import type { HostDir } from '../host/host-dir.js';

/** Where a frozen entry is copied: a path in the delta's work/ directory. */
export interface CopyTarget {
  readonly work: HostDir;
  readonly rel: string;
}

export const flattenFs = {
  /**
   * Copies the entry `st` at `rel` of the frozen upper tree `from` to `to` with its owner, mode and (for
   * all but a directory, whose times are set once it is filled: setTimes) times. A directory is made
   * empty. Content by kernel copy through the fds' magic links, as copy-up does.
   */
  async copyEntry(from: HostDir, rel: string, st: BigIntStats, to: CopyTarget): Promise<void> {
    const { work } = to;
    const mode = Number(st.mode) & 0o7777;
    if (st.isDirectory()) {
      await work.mkdir(to.rel, 0o700);
    } else if (st.isFile()) {
      const dst = await work.open(to.rel, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
      try {
        const src = await from.open(rel, constants.O_RDONLY);
        try {
          await fsp.copyFile(fdPath(src.fd), fdPath(dst.fd));
        } finally {
          await src.close();
        }
      } finally {
        await dst.close();
      }
    } else if (st.isSymbolicLink()) {
      await work.symlink(await from.readlink(rel), to.rel);
    } else if (st.isSocket()) {
      await work.mksock(to.rel, mode);
    } else if (st.isFIFO() || st.isCharacterDevice() || st.isBlockDevice()) {
      await work.mknod(to.rel, Number(st.mode), st.isFIFO() ? 0 : st.rdev);
    } else {
      throw new FsError('EPERM', `cannot copy /${rel} of a frozen layer`);
    }
    // chown before chmod: a chown clears set-id bits. Only when it differs (the worker may not be root).
    const made = await work.lstat(to.rel);
    if (made.uid !== st.uid || made.gid !== st.gid) await work.lchown(to.rel, Number(st.uid), Number(st.gid));
    if (!st.isSymbolicLink()) await work.chmod(to.rel, mode);
    if (!st.isDirectory()) await work.utimes(to.rel, st.atimeNs, st.mtimeNs);
  },

  /** Sets the times of `rel` in `dir` (a directory once it holds what it will hold). */
  async setTimes(dir: HostDir, rel: string, atimeNs: bigint, mtimeNs: bigint): Promise<void> {
    await dir.utimes(rel, atimeNs, mtimeNs);
  },

  /** Moves a finished copy from work/ into the upper tree (one rename: it appears whole or not at all). */
  async place(to: CopyTarget, upper: HostDir, rel: string): Promise<void> {
    await to.work.rename(to.rel, { dir: upper, rel });
  },

  /** Removes a copy left half made in work/. */
  async discard(to: CopyTarget): Promise<void> {
    await to.work.removeTree(to.rel);
  },
};
