// Warm-ups of the host's caches from the thread pool, never needed for correctness: a miss (the parent
// directory's fd not cached) does nothing, and nothing here ever rejects. Callbacks and raw fds that never
// leave these functions, not FileHandles: their promise machinery cost the JS thread more per file than the
// read-ahead saved.
import { close, constants, lstat, open, read } from 'node:fs';
import type { HostDir } from './host-dir.js';

/**
 * Reads the start of regular file `rel` into `sink` (discarded: the point is the host page cache). Resolves
 * with the bytes read, -1 when nothing was. O_NONBLOCK: a FIFO must not block a pool thread.
 */
export function warmRead(dir: HostDir, rel: string, sink: Buffer): Promise<number> {
  const path = dir.pooledPath(rel);
  if (path === undefined) return Promise.resolve(-1);
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  return new Promise((resolve) => {
    open(path.at, flags, (err, fd) => {
      // The kernel has resolved the name: the directory fd may be closed from now on.
      path.release();
      if (err !== null) return resolve(-1);
      read(fd, sink, 0, sink.length, 0, (readErr, bytesRead) =>
        close(fd, () => resolve(readErr === null ? bytesRead : -1)),
      );
    });
  });
}

/**
 * lstat of `rel`, result discarded: brings a cold inode into the host's inode cache, so the synchronous
 * lstat of a lookup that follows takes microseconds instead of holding the JS thread for a disk read (the
 * entry warm-up's listings, fs/readdir-plus.ts).
 */
export function warmInode(dir: HostDir, rel: string): Promise<void> {
  const path = dir.pooledPath(rel);
  if (path === undefined) return Promise.resolve();
  return new Promise((resolve) => {
    lstat(path.at, () => {
      path.release();
      resolve();
    });
  });
}
