// How a HostDir finds what it operates on: the root, the cache of directory fds, the walk that never
// follows a symlink, and the namespace generation. HostDir (host-dir.ts) adds the operations.
import { openSync } from 'node:fs';

import { AbsentDirs } from './absent-dirs.js';
import { acquireDir } from './dir-acquire.js';
import { dirStillAt } from './dir-check.js';
import { DirFdCache, type CachedDir } from './dir-fd-cache.js';
import { fdPath, WALK_DIR_FLAGS } from './flags.js';
import { missing } from './host-values.js';
import { RawFile, type HostFile } from './raw-file.js';
import { checkLastPart, splitRel } from './rel-path.js';

/**
 * statfs f_type of filesystems whose directories have st_nlink = 2 + their number of subdirectories
 * (ext2/3/4, XFS, tmpfs). Others may report 1 (btrfs, overlayfs' merged directories) or a constant, so
 * there a directory's link count is only ever computed from its listing.
 */
const SUBDIR_COUNTING_FS = new Set([0xef53, 0x58465342, 0x01021994]);

/** A directory tree below one root fd; see HostDir for the invariant every access keeps. */
export class DirTree {
  readonly path: string;

  protected readonly root: CachedDir;

  /** The root's own handle (the cache types it as a bare fd). */
  protected readonly rootFile: HostFile;

  protected readonly cache: DirFdCache;

  /** The root's fd, for code that opens beneath it itself (openat2 with RESOLVE_BENEATH, no symlinks). */
  get rootFd(): number {
    return this.root.handle.fd;
  }

  protected closed = false;

  #generation = 0;

  /**
   * Whether this tree's filesystem counts subdirectories in a directory's st_nlink (SUBDIR_COUNTING_FS):
   * then a directory whose lstat says 2 has none, which spares the listing a link count would need.
   */
  readonly nlinkCountsSubdirs: boolean;

  /** Directories recently found missing (the codebase layer); null: not remembered. */
  readonly #absent: AbsentDirs | null;

  protected constructor(
    path: string,
    root: HostFile,
    cache: DirFdCache,
    fsType: number,
    rememberMissingMs: number | undefined,
  ) {
    this.path = path;
    this.#absent = rememberMissingMs === undefined ? null : new AbsentDirs(rememberMissingMs);
    this.root = DirFdCache.pinned(root);
    this.rootFile = root;
    this.cache = cache;
    this.nlinkCountsSubdirs = SUBDIR_COUNTING_FS.has(fsType);
  }

  /**
   * Whether the cached fd of directory `rel` is still the directory at that name (dirStillAt), checked
   * from its parent's fd (itself checked the same way, up to the root): two synchronous stats instead of
   * re-opening the path in the thread pool every `cacheMaxAgeMs` (2 s for the codebase layer: most of a
   * second `grep -r`'s walk). A name replaced behind our back fails, and the entry is re-opened as before.
   */
  protected stillCurrent(rel: string, entry: CachedDir): boolean {
    const slash = rel.lastIndexOf('/');
    const parent = slash < 0 ? this.root : this.cache.acquire(rel.slice(0, slash));
    if (parent === undefined) return false;
    try {
      return dirStillAt(parent.handle.fd, rel.slice(slash + 1), entry.handle.fd);
    } finally {
      if (parent !== this.root) this.cache.releaseNow(parent);
    }
  }

  /** Closes the root and every cached fd. Using the HostDir afterwards is a bug. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.cache.clear();
    await this.root.handle.close();
  }

  /**
   * Changes whenever an operation of this HostDir that can add, remove or move a name starts or ends.
   * Lets callers cache facts about the namespace ("no such entry") exactly: a fact observed while the
   * generation did not move is true until it moves. Names created outside this object (another process)
   * are not seen; the layers are private to their worker.
   */
  get generation(): number {
    return this.#generation;
  }

  /** Runs a namespace change with the generation bumped before and after it. */
  protected async changing<T>(op: () => Promise<T>): Promise<T> {
    this.#generation++;
    try {
      return await op();
    } finally {
      this.#generation++;
    }
  }

  /** Names were made behind this object (the binding's create fast path): no absence seen before stands. */
  changedOutside(): void {
    this.#generation++;
  }

  /**
   * Directory `rel` was removed behind this object (the binding's rmdir fast path): its cached fd, and any
   * below it, name a dead directory now; a directory made at that path later is opened anew.
   */
  removedOutside(rel: string): Promise<void> {
    this.#generation++;
    return this.cache.invalidate(rel);
  }

  /** Number of cached directory fds (for tests and metrics). */
  get cachedDirs(): number {
    return this.cache.size;
  }

  /** Drops every cached directory fd, so the next operations walk from the root again. */
  async invalidateCache(): Promise<void> {
    this.#generation++; // the reason to drop the fds is usually that the tree changed behind our back
    await this.cache.clear();
  }

  /** `make` (a create) on `rel` synchronously as a namespace change; undefined on a miss (sync-make.ts). */
  changeSyncIfCached<T>(rel: string, make: (at: string) => T): T | undefined {
    if (this.closed || rel === '') return undefined;
    this.#generation++;
    const made = this.inCachedParent(rel, make); // on a throw, one bump already voids what it must
    this.#generation++;
    return made;
  }

  /**
   * Runs `fn` synchronously on the magic-link path of `rel` ('' excluded) when its parent's fd is cached;
   * undefined on a miss, after checking the whole path as the walk that follows will. Below a directory
   * known missing: `ifMissing()` where given (no Error built and thrown: its stack trace costs more than
   * the lstat it stands for), else the walk's ENOENT is thrown.
   */
  protected inCachedParent<T>(rel: string, fn: (at: string) => T, ifMissing?: () => T): T | undefined {
    const slash = rel.lastIndexOf('/');
    const name = rel.slice(slash + 1);
    checkLastPart(name, rel); // the parent, if cached, is a validated path (checkLastPart)
    const dir = this.closed ? undefined : slash < 0 ? this.root : this.cache.acquire(rel.slice(0, slash));
    if (dir === undefined) {
      splitRel(rel);
      // Below a directory recently found missing: the answer the walk would give, without the walk.
      if (this.#absent?.coversParentOf(rel, this.#generation) === true) {
        if (ifMissing !== undefined) return ifMissing();
        throw missing(rel);
      }
      return undefined;
    }
    try {
      return fn(`${fdPath(dir.handle.fd)}/${name}`);
    } finally {
      // Releasing only closes a directory fd evicted meanwhile (releaseNow).
      if (dir !== this.root) this.cache.releaseNow(dir);
    }
  }

  /**
   * Opens and caches directory `rel`'s fd synchronously when its parent's is cached and its own is not
   * (same flags as the walk: O_PATH|O_DIRECTORY|O_NOFOLLOW). For a directory just looked up: the lookups
   * of its children that follow then take the synchronous path (lstatIfCached) instead of each first
   * one walking through the thread pool (an open and an lstat there: ~0.3-0.9 ms under load, against a
   * few µs). Any failure leaves the cache as it was; the walk reports it when an operation needs it.
   */
  cacheDirSync(rel: string): void {
    if (this.closed || rel === '' || this.cache.has(rel)) return;
    try {
      const fd = this.inCachedParent(rel, (at) => openSync(at, WALK_DIR_FLAGS));
      if (fd !== undefined) this.cache.releaseNow(this.cache.insert(rel, new RawFile(fd)));
    } catch {
      // Not a directory (any more), a symlink, gone: nothing to cache.
    }
  }

  /**
   * Runs `use` with an fd of directory `rel` ('' is the root) if one is cached (never opens one), kept
   * open until what `use` returns settles; undefined without a cached fd. For the read-ahead, whose
   * files the binding opens from that fd on its own threads (store-ahead.ts).
   */
  withCachedDir<T>(rel: string, use: (dirFd: number) => Promise<T>): Promise<T> | undefined {
    if (this.closed) return undefined;
    const dir = rel === '' ? this.root : this.cache.acquire(rel);
    if (dir === undefined) return undefined;
    const done = use(dir.handle.fd);
    if (dir !== this.root) void done.finally(() => this.cache.release(dir).catch(() => undefined));
    return done;
  }

  /**
   * Runs `fn` with a magic path for `rel` inside its parent directory: `/proc/self/fd/<parentFd>/<name>`.
   * The parent fd is held (not closable) until `fn` settles.
   */
  protected async inParent<T>(
    rel: string,
    fn: (at: string, dirFd: number, name: string) => Promise<T>,
  ): Promise<T> {
    const parts = splitRel(rel);
    const name = parts.pop();
    if (name === undefined) throw new TypeError('operation needs a path below the root');
    const dir = await this.acquireDir(parts);
    try {
      return await fn(`${fdPath(dir.handle.fd)}/${name}`, dir.handle.fd, name);
    } finally {
      await this.cache.release(dir);
    }
  }

  /** Runs `fn` with the directory `rel` held open. */
  protected async withDir<T>(rel: string, fn: (dir: CachedDir) => Promise<T>): Promise<T> {
    const dir = await this.acquireDir(splitRel(rel));
    try {
      return await fn(dir);
    } finally {
      await this.cache.release(dir);
    }
  }

  /** The directory made of `parts`, with a reference taken (dir-acquire.ts). */
  private acquireDir(parts: readonly string[]): Promise<CachedDir> {
    if (this.closed) return Promise.reject(new Error(`HostDir ${this.path} used after close`));
    if (this.#absent?.coversDir(parts.join('/'), this.#generation) === true) {
      return Promise.reject(missing(parts.join('/')));
    }
    return acquireDir(
      { cache: this.cache, root: this.root, absent: this.#absent, generation: this.#generation },
      parts,
    );
  }
}
