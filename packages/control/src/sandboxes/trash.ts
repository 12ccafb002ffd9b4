// Destroy's removal of a sandbox directory, off the caller's path: the directory is renamed into the data
// directory's trash (one rename on the same file system: atomic, instant whatever the delta holds) and
// removed in the background; a 200,000-file delta took minutes to remove in place. What a process leaves
// in the trash when it dies (a removal half-way) is finished by the next process that opens the data
// directory (recover) and by `agentfense gc`, so nothing in it is ever lost track of.
import { randomUUID } from 'node:crypto';
import { lstat, mkdir, readdir, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { listMounts, removeTree } from '@agentfense/fuse-worker';
import type { DataLayout } from '../paths.js';

/** Attempts at removing one trash entry while another process may be removing it too. */
const REMOVE_ATTEMPTS = 3;

export class SandboxTrash {
  readonly #dir: string;
  readonly #database: string;
  readonly #logger: Logger;
  /** Removals under way in this process, by entry path (one removal per entry), and what started them. */
  readonly #removing = new Map<string, { readonly done: Promise<void>; readonly by: 'destroy' | 'sweep' }>();
  /** A sweep's listing of the trash, until its removals are registered (idle waits for it too). */
  #listing: Promise<void> = Promise.resolve();

  /** The data directory's trash; once its database is gone, the directory is being removed (no new trash). */
  constructor(options: { readonly layout: DataLayout; readonly logger: Logger }) {
    this.#dir = options.layout.trashDir;
    this.#database = options.layout.database;
    this.#logger = options.logger;
  }

  /**
   * Moves `dir` into the trash and starts its removal in the background. Resolves false when it was left
   * where it is: nothing there, the data directory being removed (its database gone: the trash is not
   * made again), or something is mounted inside it (a removal must fail there and be
   * reported as it always was: the caller removes in place, which throws and keeps the sandbox in ERROR).
   */
  async discard(dir: string, name: string): Promise<boolean> {
    if ((await lstat(dir).catch(() => undefined)) === undefined) return false;
    if ((await lstat(this.#database).catch(() => undefined)) === undefined) return false;
    const inside = `${dir}/`;
    if ((await listMounts()).some((m) => m.mountpoint === dir || m.mountpoint.startsWith(inside))) {
      return false;
    }
    // Not recursive: a data directory someone removed is never made again for its trash.
    try {
      await mkdir(this.#dir, { mode: 0o700 });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return false;
      if (code !== 'EEXIST') throw err;
    }
    const entry = join(this.#dir, `${name}.${randomUUID()}`);
    try {
      await rename(dir, entry);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
    void this.#remove(entry, 'destroy');
    return true;
  }

  /** Starts removing, in the background, whatever is in the trash (a dead process's removals). */
  sweep(): void {
    this.#listing = this.#entries().then((entries) => {
      for (const entry of entries) void this.#remove(entry, 'sweep');
    });
  }

  /**
   * Removes what is in the trash now (a sweep of this process's under way: finished first), except what a
   * destroy of this process is removing (that sandbox is reported as destroyed, not as a leftover);
   * resolves the entries removed and those that could not be.
   */
  async empty(options: { readonly dryRun?: boolean } = {}): Promise<{
    readonly removed: string[];
    readonly failed: { readonly entry: string; readonly err: unknown }[];
  }> {
    const entries = (await this.#entries()).filter((entry) => this.#removing.get(entry)?.by !== 'destroy');
    if (options.dryRun === true) return { removed: entries, failed: [] };
    const removed: string[] = [];
    const failed: { entry: string; err: unknown }[] = [];
    for (const entry of entries) {
      try {
        await this.#removing.get(entry)?.done; // never rejects: the removal below says how it ended
        await removeEntry(entry);
        removed.push(entry);
      } catch (err) {
        failed.push({ entry, err });
      }
    }
    return { removed, failed };
  }

  /** Waits for the removals under way in this process (close). */
  async idle(): Promise<void> {
    await this.#listing;
    await Promise.all([...this.#removing.values()].map((r) => r.done));
  }

  async #entries(): Promise<string[]> {
    const names = await readdir(this.#dir).catch(() => [] as string[]);
    return names.map((name) => join(this.#dir, name));
  }

  /** Removes one entry; failures are logged and left to the next sweep or gc. Never rejects. */
  #remove(entry: string, by: 'destroy' | 'sweep'): Promise<void> {
    const existing = this.#removing.get(entry);
    if (existing !== undefined) return existing.done;
    const started = performance.now();
    const removal = removeEntry(entry).then(
      () => this.#logger.debug({ entry, ms: Math.round(performance.now() - started) }, 'trash removed'),
      (err: unknown) =>
        this.#logger.warn({ err, entry }, 'could not remove a destroyed sandbox from the trash; gc retries'),
    );
    const done = removal.finally(() => this.#removing.delete(entry));
    this.#removing.set(entry, { done, by });
    return done;
  }
}

/**
 * removeTree, tolerating another process removing the same entry at the same time (two processes opening
 * the data directory both sweep it): an ENOENT half-way means the other took that part; start again.
 */
async function removeEntry(entry: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await removeTree(entry);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= REMOVE_ATTEMPTS) throw err;
    }
  }
}
