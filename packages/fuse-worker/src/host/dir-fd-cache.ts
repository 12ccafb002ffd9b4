// A bounded LRU of open directory fds keyed by root-relative path, with reference counts.
import { relIsWithin } from './rel-path.js';

/** What the cache needs of a directory fd: a FileHandle (opened in the pool), or a RawFile (synchronously). */
export interface DirHandle {
  readonly fd: number;
  close(): Promise<void>;
}

/** Default DirFdCacheOptions.maxKeyChars. */
const DEFAULT_MAX_KEY_CHARS = 8 * 1024 * 1024;

/** One cached directory fd. */
export interface CachedDir {
  readonly handle: DirHandle;
  /**
   * Operations currently using `handle`'s /proc magic link. Invariant: a handle is closed only when it has
   * been evicted AND refs is 0, because a closed fd number is reused by the next open(), and a path built
   * from the old number would then resolve to whatever the new fd refers to.
   */
  refs: number;
  evicted: boolean;
  /** Never evicted or closed by the cache (the root fd; its owner closes it). */
  readonly pinned: boolean;
  /** When the fd was opened or last found to still be the directory at its name (stillCurrent). */
  openedAt: number;
}

export interface DirFdCacheOptions {
  /** Maximum number of unpinned fds kept open when idle. */
  readonly capacity: number;
  /**
   * Maximum number of characters of the keys (paths) held (default 8 Mi). Paths have no bound of their
   * own: 256 fds below a chain of 1,200 nested directories of 255-character names were keyed by ~75 MB of
   * paths. Past it, the least recently used entries go as past `capacity`; the deepest ones, in use, stay.
   */
  readonly maxKeyChars?: number;
  /**
   * Entries older than this are checked on their next use (stillCurrent) and re-opened unless they pass.
   * Bounds how long a directory replaced behind our back (another worker's commit) stays visible through a
   * stale fd. Infinity: only our own renames/rmdirs invalidate (right for trees that only this process
   * changes).
   */
  readonly maxAgeMs: number;
  /**
   * Whether an expired entry's fd is still the directory its path names now (synchronous). Without it an
   * expired entry is re-opened, which costs the caller a thread-pool open and a walk.
   */
  readonly stillCurrent?: (rel: string, entry: CachedDir) => boolean;
  /** Clock, injectable for tests. */
  readonly now?: () => number;
}

/**
 * Staleness is a correctness issue, never a security one: a cached fd keeps pointing at the same directory
 * inode even when that directory is renamed, so a stale entry can only answer for the wrong place inside
 * the same tree (entries are invalidated by prefix on every rename/rmdir this process performs). It could
 * point outside the root only if someone outside the sandbox moved a directory out of the root.
 */
export class DirFdCache {
  private readonly entries = new Map<string, CachedDir>();
  private keyChars = 0;
  private readonly maxKeyChars: number;
  private readonly options: DirFdCacheOptions;
  private readonly now: () => number;

  constructor(options: DirFdCacheOptions) {
    this.options = options;
    this.maxKeyChars = options.maxKeyChars ?? DEFAULT_MAX_KEY_CHARS;
    this.now = options.now ?? Date.now;
  }

  /** Number of cached entries (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  /** A pinned entry (the root), never closed by the cache. */
  static pinned(handle: DirHandle): CachedDir {
    return { handle, refs: 0, evicted: false, pinned: true, openedAt: 0 };
  }

  /** Whether `rel` has an entry (without touching its recency or age). */
  has(rel: string): boolean {
    return this.entries.has(rel);
  }

  /** Takes a reference on the cached fd of `rel` (marking it most recently used), or undefined on a miss. */
  acquire(rel: string): CachedDir | undefined {
    const entry = this.entries.get(rel);
    if (entry === undefined) return undefined;
    if (this.now() - entry.openedAt > this.options.maxAgeMs) {
      if (this.options.stillCurrent?.(rel, entry) !== true) {
        this.evictInBackground(rel, entry);
        return undefined;
      }
      entry.openedAt = this.now();
    }
    // Map iteration order is insertion order: re-inserting makes this the most recently used entry.
    this.entries.delete(rel);
    this.entries.set(rel, entry);
    entry.refs++;
    return entry;
  }

  /**
   * Caches a freshly opened fd and returns it with one reference taken. If a concurrent walk cached the same
   * path first, the newcomer is still returned (and closed on release) so both walks stay correct.
   */
  insert(rel: string, handle: DirHandle): CachedDir {
    const entry: CachedDir = { handle, refs: 1, evicted: false, pinned: false, openedAt: this.now() };
    if (this.entries.has(rel)) {
      entry.evicted = true;
      return entry;
    }
    this.entries.set(rel, entry);
    this.keyChars += rel.length;
    this.trim();
    return entry;
  }

  /** Drops one reference; closes the fd if it was evicted meanwhile. */
  async release(entry: CachedDir): Promise<void> {
    entry.refs--;
    if (entry.evicted && entry.refs === 0 && !entry.pinned) await entry.handle.close();
  }

  /**
   * release() for a synchronous user: no promise unless the fd is closed now (evicted while held), and
   * that close can only fail on a double close, a bug tests would show as EBADF.
   */
  releaseNow(entry: CachedDir): void {
    entry.refs--;
    if (entry.evicted && entry.refs === 0 && !entry.pinned) void entry.handle.close().catch(() => undefined);
  }

  /** Evicts `rel` and everything cached below it (after a rename or rmdir of `rel`). */
  async invalidate(rel: string): Promise<void> {
    const closing: Promise<void>[] = [];
    for (const [key, entry] of this.entries) {
      if (relIsWithin(key, rel)) closing.push(this.evict(key, entry));
    }
    await Promise.all(closing);
  }

  /** Evicts everything; fds still in use close when their last user releases them. */
  async clear(): Promise<void> {
    await this.invalidate('');
  }

  private evict(key: string, entry: CachedDir): Promise<void> {
    if (this.entries.get(key) === entry) {
      this.entries.delete(key);
      this.keyChars -= key.length;
    }
    entry.evicted = true;
    return entry.refs === 0 ? entry.handle.close() : Promise.resolve();
  }

  private trim(): void {
    const within = (): boolean =>
      this.entries.size <= this.options.capacity && this.keyChars <= this.maxKeyChars;
    if (within()) return;
    for (const [key, entry] of this.entries) {
      // The entry just inserted (the last) stays: its caller holds it and walks on from it.
      if (within() || this.entries.size === 1) break;
      // An fd in use is evicted too (the map stays bounded); it is closed by its last release.
      this.evictInBackground(key, entry);
    }
  }

  private evictInBackground(key: string, entry: CachedDir): void {
    // close() of a directory fd we own can only fail on a double close, a bug tests would show as EBADF.
    void this.evict(key, entry).catch(() => undefined);
  }
}
