// The delta's trash/: what a restore dropped (the writable layer's upper/ tree, renamed there in one step)
// waits there to be removed in the background, after the restore has answered. A process death leaves it
// for the next open or restore. Nothing in trash/ is part of any view, nor charged to the disk quota (which
// counts upper/). Also: deferring work until a layer change has answered (afterAnswer).
import fsp from 'node:fs/promises';
import { join } from 'node:path';

import { randomHex } from '../host/random-hex.js';

/** The trash directory of the delta at `deltaDir`. */
export function trashDirOf(deltaDir: string): string {
  return join(deltaDir, 'trash');
}

/** A new name in the trash for a dropped tree. */
export function trashNameIn(deltaDir: string): string {
  return join(trashDirOf(deltaDir), `upper-${Date.now()}-${randomHex(6)}`);
}

/** How the trash is emptied (an object, so that a test can hold the removal back). */
export const trashFs = {
  async remove(path: string): Promise<void> {
    await fsp.rm(path, { recursive: true, force: true });
  },
};

/** Removes everything in the delta's trash, one dropped tree at a time; no trash is fine. */
export async function emptyTrash(deltaDir: string): Promise<void> {
  let names: string[];
  try {
    names = await fsp.readdir(trashDirOf(deltaDir));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  for (const name of names) await trashFs.remove(join(trashDirOf(deltaDir), name));
}

/** Runs `work` once the current answer has gone out (the next turn of the event loop). */
export function afterAnswer<T>(work: () => Promise<T>): Promise<T> {
  return new Promise<void>((resolve) => setImmediate(resolve)).then(work);
}
