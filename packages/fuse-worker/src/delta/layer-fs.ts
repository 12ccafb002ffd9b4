// The host operations of a checkpoint or a restore (layer-change.ts), in one object: every step that
// changes the disk goes through it, so a test can make the process "die" before any of them.
import { constants } from 'node:fs';
import fsp from 'node:fs/promises';
import { dirname } from 'node:path';

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
    await layerFs.writeFileSynced(path, text);
    await layerFs.fsyncDir(dirname(path));
  },

  /** A second name for the file `from` (a hard link: the same inode, nothing copied). */
  async link(from: string, to: string): Promise<void> {
    await fsp.link(from, to);
  },

  /** Creates the empty file `path` (it must not exist): a name alone, nothing for a power cut to lose. */
  async createEmpty(path: string): Promise<void> {
    const file = await fsp.open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    await file.close();
  },

  /**
   * Replaces the file `path` with `text` atomically: temporary file, fsync of its data, rename. The
   * directory is not fsynced: the name is ordered with the steps after it as the delta's own snapshot
   * renames are (README, "Durability"), and the data under it is never an empty file after a power cut.
   */
  async writeFileSynced(path: string, text: string): Promise<void> {
    const tmp = `${path}.tmp`;
    const file = await fsp.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
    try {
      await file.writeFile(text);
      await file.sync();
    } finally {
      await file.close();
    }
    await fsp.rename(tmp, path);
  },

  async fsyncDir(path: string): Promise<void> {
    const dir = await fsp.open(path, constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  },
};
