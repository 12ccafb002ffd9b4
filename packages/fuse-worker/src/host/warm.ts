// Warming the host's inode cache from the thread pool, never needed for correctness: a miss (the parent
// directory's fd not cached) does nothing, and nothing here ever rejects.
import { lstat } from 'node:fs';
import type { HostDir } from './host-dir.js';
import { fdPath } from './flags.js';
import { checkLastPart } from './rel-path.js';

/**
 * lstat of `name` in directory `dirRel`, result discarded: brings a cold inode into the host's inode cache,
 * so the synchronous lstat of a lookup that follows takes microseconds instead of holding the JS thread for
 * a disk read (the entry warm-up's listings, fs/readdir-plus.ts). A callback, not a promise per file.
 */
export function warmInode(dir: Pick<HostDir, 'withCachedDir'>, dirRel: string, name: string): Promise<void> {
  try {
    checkLastPart(name, dirRel === '' ? name : `${dirRel}/${name}`);
  } catch {
    return Promise.resolve();
  }
  const done = dir.withCachedDir(
    dirRel,
    (fd) => new Promise<void>((resolve) => lstat(`${fdPath(fd)}/${name}`, () => resolve())),
  );
  return done ?? Promise.resolve();
}
