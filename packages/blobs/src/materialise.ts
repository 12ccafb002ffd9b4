// Building one snapshot's tree from the node's content cache. Every parent is a directory the builder
// made itself (the manifest has no entry under a symlink), files are hard links to cache objects
// (a copy, reflinked where the filesystem can, when an object has too many links), symlinks are made
// as they are listed and never followed. The tree is built in a temporary directory and renamed into
// place whole.
import { constants } from 'node:fs';
import { chmod, copyFile, link, mkdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoOf } from './fs-store.js';
import type { Manifest } from './manifest.js';

/** The cache object a file entry is a link to: one per digest and mode (links share their mode). */
export function objectName(digest: string, mode: number): string {
  return `${digest}-${mode.toString(8)}`;
}

/** Builds `manifest`'s tree in `dir` (which exists and is empty) from the objects in `objectsDir`. */
export async function buildTree(manifest: Manifest, objectsDir: string, dir: string): Promise<void> {
  // Entries are sorted, so a parent is always made before what is in it.
  for (const entry of manifest.entries) {
    const dest = join(dir, entry.path);
    switch (entry.type) {
      case 'dir':
        await mkdir(dest, { mode: 0o700 });
        break;
      case 'file': {
        const object = join(objectsDir, objectName(entry.digest, entry.mode));
        await link(object, dest).catch(async (err: unknown) => {
          if (errnoOf(err) !== 'EMLINK') throw err;
          await copyFile(object, dest, constants.COPYFILE_FICLONE | constants.COPYFILE_EXCL);
          await chmod(dest, entry.mode);
        });
        break;
      }
      case 'symlink':
        await symlink(entry.target, dest);
        break;
    }
  }
  // Directory modes last (a 0555 directory could not be filled), deepest first.
  for (let i = manifest.entries.length - 1; i >= 0; i--) {
    const entry = manifest.entries[i];
    if (entry?.type === 'dir') await chmod(join(dir, entry.path), entry.mode);
  }
  await chmod(dir, 0o755);
}
