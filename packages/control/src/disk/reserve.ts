// Room kept for the operations that free room. On a full filesystem every write fails, the database's
// too, and destroy, discard and codebase deletion each record something (an ownership claim, a journal
// record, a log line) before they remove anything, so a full data directory could not be emptied
// through the API. A file of RESERVE_BYTES in the data directory holds that room: it is written when
// there is room for it and as much again, removed just before a freeing operation runs on a filesystem
// with less than that left, and written again after one once there is room.
import { lstat, open, rename, statfs, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';

/** Room a destroy or discard needs before it has freed anything: a few database pages, a few lines. */
export const RESERVE_BYTES = 4 * 1024 * 1024;
/** A filesystem with fewer free inodes than this counts as full (a create would fail). */
const MIN_FREE_INODES = 64;
const CHUNK = Buffer.alloc(1024 * 1024);

export interface SpaceReserveOptions {
  /** The reserve file (in the data directory). */
  readonly file: string;
  /** A file whose absence means the data directory is being removed: nothing is written then. */
  readonly database: string;
  readonly logger: Logger;
  readonly bytes?: number;
}

/** The data directory's reserve of room; see the file comment. */
export class SpaceReserve {
  readonly #file: string;
  readonly #database: string;
  readonly #logger: Logger;
  readonly #bytes: number;

  constructor(options: SpaceReserveOptions) {
    this.#file = options.file;
    this.#database = options.database;
    this.#logger = options.logger;
    this.#bytes = options.bytes ?? RESERVE_BYTES;
  }

  /**
   * Writes the reserve when it is missing and the filesystem has room for it and as much again (a
   * reserve that filled the filesystem would defeat itself). Never throws: failing is logged.
   */
  async replenish(): Promise<void> {
    try {
      if ((await lstat(this.#file).catch(() => undefined))?.size === this.#bytes) return;
      // A data directory being removed (its database gone) gets nothing new.
      if ((await lstat(this.#database).catch(() => undefined)) === undefined) return;
      if ((await this.#free()) < 2 * this.#bytes) return;
      await this.#write();
    } catch (err) {
      this.#logger.warn({ err, file: this.#file }, 'could not write the space reserve');
    }
  }

  /**
   * Runs `work`, an operation that frees room, with the reserve's room available to it when the
   * filesystem is (nearly) full, and writes the reserve again afterwards if there is room.
   */
  async freeing<T>(work: () => Promise<T>): Promise<T> {
    if ((await this.#free().catch(() => Infinity)) < this.#bytes) {
      const released = await unlink(this.#file).then(
        () => true,
        () => false,
      );
      if (released) this.#logger.warn({ file: this.#file }, 'filesystem full: released the space reserve');
    }
    try {
      return await work();
    } finally {
      await this.replenish();
    }
  }

  /** Bytes this process may still write there (root may use the blocks kept for it); 0 without inodes. */
  async #free(): Promise<number> {
    const fs = await statfs(dirname(this.#file));
    if (fs.ffree < MIN_FREE_INODES) return 0;
    const blocks = process.getuid?.() === 0 ? fs.bfree : fs.bavail;
    return blocks * fs.bsize;
  }

  /** Writes the reserve under a temporary name and renames it into place; no debris on failure. */
  async #write(): Promise<void> {
    const temp = `${this.#file}.${process.pid}.tmp`;
    const handle = await open(temp, 'wx', 0o600);
    try {
      for (let written = 0; written < this.#bytes; written += CHUNK.length) {
        await handle.write(CHUNK, 0, Math.min(CHUNK.length, this.#bytes - written));
      }
      await handle.close();
      await rename(temp, this.#file);
    } catch (err) {
      await handle.close().catch(() => undefined);
      await unlink(temp).catch(() => undefined);
      throw err;
    }
  }
}
