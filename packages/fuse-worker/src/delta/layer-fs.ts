// The host operations of a checkpoint or a restore (layer-change.ts), in one object: every step that
// changes the disk goes through it, so a test can make the process "die" before any of them.
// Renames, links, mkdirs, creates and unlinks of a name run synchronously on the worker's thread: each is
// a few µs of metadata in the worker's own directory, where a thread-pool round trip costs 0.05-2 ms on a
// loaded host, and a checkpoint is ten of them. What can block long (an fsync, a recursive removal) stays
// in the pool.
import {
  closeSync,
  constants,
  fsync,
  linkSync,
  mkdirSync,
  openSync,
  renameSync,
  symlinkSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import fsp from 'node:fs/promises';
import { dirname } from 'node:path';
import { promisify } from 'node:util';

const fsyncAsync = promisify(fsync);

/** Runs a synchronous step as a promise (a failure is a rejection, as from the async steps). */
function done(step: () => void): Promise<void> {
  try {
    step();
    return Promise.resolve();
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

/** Host operations on the worker's own directories (the delta's and the frozen layers', never the sandbox's). */
export const layerFs = {
  mkdir(path: string): Promise<void> {
    return done(() => mkdirSync(path, { mode: 0o700 }));
  },

  rename(from: string, to: string): Promise<void> {
    return done(() => renameSync(from, to));
  },

  /** Removes `path` and everything below it; nothing there is fine. */
  async remove(path: string): Promise<void> {
    await fsp.rm(path, { recursive: true, force: true });
  },

  /** Removes the file `path` and makes its removal durable (fsync of its directory). */
  async unlinkDurably(path: string): Promise<void> {
    try {
      unlinkSync(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    await layerFs.fsyncDir(dirname(path));
  },

  /** Replaces the file `path` with `text` atomically and durably: temporary file, fsync, rename, fsync dir. */
  async writeFileDurably(path: string, text: string): Promise<void> {
    await layerFs.writeFileSynced(path, text);
    await layerFs.fsyncDir(dirname(path));
  },

  /** A second name for the file `from` (a hard link: the same inode, nothing copied). */
  link(from: string, to: string): Promise<void> {
    return done(() => linkSync(from, to));
  },

  /**
   * Makes `path` (it must not exist) a symlink whose target is `text`: a record written whole with its
   * name, in one filesystem transaction (the target lives in the inode or in a block the filesystem
   * writes with it), so a power cut leaves the name with all of it or no name; no fsync needed.
   */
  symlink(text: string, path: string): Promise<void> {
    return done(() => symlinkSync(text, path));
  },

  /** Creates the empty file `path` (it must not exist): a name alone, nothing for a power cut to lose. */
  createEmpty(path: string): Promise<void> {
    return done(() =>
      closeSync(openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)),
    );
  },

  /**
   * Replaces the file `path` with `text` atomically: temporary file, fsync of its data, rename. The
   * directory is not fsynced: the name is ordered with the steps after it as the delta's own snapshot
   * renames are (README, "Durability"), and the data under it is never an empty file after a power cut.
   */
  async writeFileSynced(path: string, text: string): Promise<void> {
    const tmp = `${path}.tmp`;
    // A record of a few hundred bytes: written at once; only the fsync waits for the disk.
    const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
    try {
      const data = Buffer.from(text);
      for (let at = 0; at < data.length;) at += writeSync(fd, data, at);
      await fsyncAsync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
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
