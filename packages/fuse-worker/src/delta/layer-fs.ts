// The host operations of a checkpoint or a restore (layer-change.ts), in one object: every step that
// changes the disk goes through it, so a test can make the process "die" before any of them.
import { constants } from 'node:fs';
import fsp from 'node:fs/promises';
import { dirname, join } from 'node:path';

import { syncFilesystem } from '../host/sync-fs.js';
import { writeSnapshotFile } from './journal.js';
import type { MetaState } from './meta-state.js';

/** Host operations on the worker's own directories (the delta's and the frozen layers', never the sandbox's). */
export const layerFs = {
  async mkdir(path: string): Promise<void> {
    await fsp.mkdir(path, { mode: 0o700 });
  },

  async rename(from: string, to: string): Promise<void> {
    await fsp.rename(from, to);
  },

  /** Removes `path` and everything below it; nothing there is fine. */
  async remove(path: string): Promise<void> {
    await fsp.rm(path, { recursive: true, force: true });
  },

  /** Removes the file `path` and makes its removal durable (fsync of its directory). */
  async unlinkDurably(path: string): Promise<void> {
    await fsp.unlink(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
    await layerFs.fsyncDir(dirname(path));
  },

  /** Replaces the file `path` with `text` atomically and durably: temporary file, fsync, rename, fsync dir. */
  async writeFileDurably(path: string, text: string): Promise<void> {
    const tmp = `${path}.tmp`;
    const file = await fsp.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
    try {
      await file.writeFile(text);
      await file.sync();
    } finally {
      await file.close();
    }
    await fsp.rename(tmp, path);
    await layerFs.fsyncDir(dirname(path));
  },

  /** Writes `state` as a frozen layer's meta/snapshot.json in `layerDir` (fsynced). */
  writeLayerSnapshot(layerDir: string, state: MetaState): Promise<void> {
    writeSnapshotFile(join(layerDir, 'meta', 'snapshot.json'), state, 0);
    return Promise.resolve();
  },

  async fsyncDir(path: string): Promise<void> {
    const dir = await fsp.open(path, constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  },

  /** syncfs(2) of the filesystem holding `dir`; false when the host cannot (logged by the caller). */
  syncFilesystem(dir: string): Promise<boolean> {
    return syncFilesystem(dir);
  },
};
