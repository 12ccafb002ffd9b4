// A root directory opened once, and every filesystem operation below it without following any symlink.
import type { BigIntStats, Stats } from 'node:fs';
import { constants, lstatSync, openSync } from 'node:fs';
import fsp from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';

import { hostIo } from 'fuse-native/lowlevel.js';

import { dirStillAt } from './dir-check.js';
import { DirFdCache, type CachedDir } from './dir-fd-cache.js';
import { fdPath, PATH_ONLY_FLAGS, WALK_DIR_FLAGS } from './flags.js';
import { isMissing, timespec, type TimeSpec } from './host-values.js';
import { RawFile } from './raw-file.js';
import { checkLastPart, splitRel } from './rel-path.js';
import { makeFifo, makeSocket } from './special-nodes.js';
import { removeTree as removeTreeAt } from './walk.js';

export { isMissing, timespec, type TimeSpec } from './host-values.js';

/** Type of a directory entry as the host reports it (d_type). */
export type HostEntryType = 'file' | 'directory' | 'symlink' | 'fifo' | 'other';

/** One entry of a host directory listing. */
export interface HostDirent {
  readonly name: string;
  readonly type: HostEntryType;
}

/**
 * statfs f_type of filesystems whose directories have st_nlink = 2 + their number of subdirectories
 * (ext2/3/4, XFS, tmpfs). Others may report 1 (btrfs, overlayfs' merged directories) or a constant, so
 * there a directory's link count is only ever computed from its listing.
 */
const SUBDIR_COUNTING_FS = new Set([0xef53, 0x58465342, 0x01021994]);

export interface HostDirOptions {
  /** Absolute path of the root. Its own last component must not be a symlink (it is trusted config). */
  readonly path: string;
  /** The root already opened (a codebase: pinned-dir.ts, no symlink in any component); else `path` is. */
  readonly root?: FileHandle;
  /** Directory fds kept open (default 256). */
  readonly cacheCapacity?: number;
  /** Re-open cached directory fds older than this (default Infinity; see DirFdCache). */
  readonly cacheMaxAgeMs?: number;
}

/** Copy source/destination for HostDir.rename and HostDir.link across two roots on one filesystem. */
export interface HostLocation {
  readonly dir: HostDir;
  readonly rel: string;
}

/**
 * Host-side access to one directory tree. Invariant: no operation follows a symlink in any component.
 * Every path is resolved by opening its directories one component at a time with
 * O_PATH|O_DIRECTORY|O_NOFOLLOW through `/proc/self/fd/<parent>/<name>` (a symlink fails with ENOTDIR or
 * ELOOP); the final component is then handed to a syscall that does not follow it (lstat, unlink, rename,
 * open with O_NOFOLLOW, ...). The magic link `/proc/self/fd/<fd>` resolves to exactly the inode of the fd,
 * so a concurrent rename cannot redirect a walk that has already passed a component.
 * Cost: with the parent directory cached, one syscall per operation; a miss adds one open per uncached
 * component.
 */
export class HostDir {
  readonly path: string;
  private readonly root: CachedDir;
  /** The root's own handle (the cache types it as a bare fd). */
  readonly #rootFile: FileHandle;
  private readonly cache: DirFdCache;
  private closed = false;
  #generation = 0;
  /**
   * Whether this tree's filesystem counts subdirectories in a directory's st_nlink (SUBDIR_COUNTING_FS):
   * then a directory whose lstat says 2 has none, which spares the listing a link count would need.
   */
  readonly nlinkCountsSubdirs: boolean;

  private constructor(path: string, root: FileHandle, cache: DirFdCache, fsType: number) {
    this.path = path;
    this.root = DirFdCache.pinned(root);
    this.#rootFile = root;
    this.cache = cache;
    this.nlinkCountsSubdirs = SUBDIR_COUNTING_FS.has(fsType);
  }

  /** Opens `options.path` as a root (O_DIRECTORY|O_NOFOLLOW on its last component). */
  static async open(options: HostDirOptions): Promise<HostDir> {
    const root = options.root ?? (await fsp.open(options.path, WALK_DIR_FLAGS));
    let fsType: number;
    try {
      // Through the fd's magic link: exactly the filesystem of the directory opened, whatever the path
      // names by now.
      fsType = (await fsp.statfs(fdPath(root.fd))).type;
    } catch {
      fsType = 0;
    }
    const self: { dir?: HostDir } = {};
    const cache = new DirFdCache({
      capacity: options.cacheCapacity ?? 256,
      maxAgeMs: options.cacheMaxAgeMs ?? Number.POSITIVE_INFINITY,
      stillCurrent: (rel, entry) => self.dir?.stillCurrent(rel, entry) ?? false,
    });
    self.dir = new HostDir(options.path, root, cache, fsType);
    return self.dir;
  }

  /**
   * Whether the cached fd of directory `rel` is still the directory at that name (dirStillAt), checked
   * from its parent's fd (itself checked the same way, up to the root): two synchronous stats instead of
   * re-opening the path in the thread pool every `cacheMaxAgeMs` (2 s for the codebase layer: most of a
   * second `grep -r`'s walk). A name replaced behind our back fails, and the entry is re-opened as before.
   */
  private stillCurrent(rel: string, entry: CachedDir): boolean {
    const slash = rel.lastIndexOf('/');
    const parent = slash < 0 ? this.root : this.cache.acquire(rel.slice(0, slash));
    if (parent === undefined) return false;
    try {
      return dirStillAt(parent.handle.fd, rel.slice(slash + 1), entry.handle.fd);
    } finally {
      if (parent !== this.root) this.cache.release(parent).catch(() => undefined);
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
  private async changing<T>(op: () => Promise<T>): Promise<T> {
    this.#generation++;
    try {
      return await op();
    } finally {
      this.#generation++;
    }
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

  /**
   * lstat of `rel` ('' is the root): never follows the final component either. When the parent's fd is
   * cached (the common case) the lstat is synchronous: a metadata lookup in a cached directory takes a
   * few µs, while a trip through libuv's thread pool costs 30-40 µs on this machine, on every FUSE
   * lookup/getattr. A miss walks asynchronously as before.
   */
  async lstat(rel: string): Promise<BigIntStats> {
    if (rel === '') return this.#rootFile.stat({ bigint: true });
    const cached = this.inCachedParent(rel, (at) => lstatSync(at, { bigint: true }));
    return cached ?? this.inParent(rel, (at) => fsp.lstat(at, { bigint: true }));
  }

  /**
   * lstat without a promise when the parent's fd is cached: the stat, null when missing (ENOENT/ENOTDIR,
   * as lstatOrNull), undefined on a cache miss or any other error (the caller then takes the async path,
   * which reports it). Lets a LOOKUP that needs no thread-pool trip avoid every await.
   */
  lstatIfCached(rel: string): BigIntStats | null | undefined {
    if (rel === '') return undefined;
    try {
      return this.inCachedParent(rel, (at) => lstatSync(at, { bigint: true, throwIfNoEntry: false }) ?? null);
    } catch (err) {
      return isMissing(err) ? null : undefined;
    }
  }

  /** lstat, or null when the path does not exist (ENOENT) or crosses a non-directory/symlink (ENOTDIR). */
  async lstatOrNull(rel: string): Promise<BigIntStats | null> {
    try {
      return await this.lstat(rel);
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  /** open(2) of `rel` with O_NOFOLLOW always added (a symlink fails with ELOOP). */
  async open(rel: string, flags: number, mode?: number): Promise<FileHandle> {
    const open = (): Promise<FileHandle> =>
      this.inParent(rel, (at) => fsp.open(at, flags | constants.O_NOFOLLOW, mode));
    return (flags & constants.O_CREAT) === 0 ? open() : this.changing(open);
  }

  /**
   * open(2) of `rel` without creating, synchronously, when its parent's fd is cached (the common case
   * right after a lookup); undefined on a cache miss, where `open` walks asynchronously. O_NOFOLLOW is
   * always added. The caller owns the returned fd (see RawFile). Why: an open through the thread pool
   * costs 30-40 µs here, a synchronous openat in a cached directory a few µs.
   */
  openSyncIfCached(rel: string, flags: number): number | undefined {
    if (this.closed || (flags & constants.O_CREAT) !== 0 || rel === '') return undefined;
    return this.inCachedParent(rel, (at) => openSync(at, flags | constants.O_NOFOLLOW));
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
   * undefined on a miss, after checking the whole path as the walk that follows will.
   */
  private inCachedParent<T>(rel: string, fn: (at: string) => T): T | undefined {
    const slash = rel.lastIndexOf('/');
    const name = rel.slice(slash + 1);
    checkLastPart(name, rel); // the parent, if cached, is a validated path (checkLastPart)
    const dir = this.closed ? undefined : slash < 0 ? this.root : this.cache.acquire(rel.slice(0, slash));
    if (dir === undefined) {
      splitRel(rel);
      return undefined;
    }
    try {
      return fn(`${fdPath(dir.handle.fd)}/${name}`);
    } finally {
      // Releasing only closes a directory fd evicted meanwhile; that close failing would be our bug.
      if (dir !== this.root) this.cache.release(dir).catch(() => undefined);
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
      if (fd !== undefined) void this.cache.release(this.cache.insert(rel, new RawFile(fd)));
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

  /** Entries of directory `rel` ('' is the root) with their d_type, unsorted. */
  async readdir(rel: string): Promise<HostDirent[]> {
    return this.withDir(rel, async (dir) => {
      const entries = await fsp.readdir(fdPath(dir.handle.fd), { withFileTypes: true });
      return entries.map((e) => ({ name: e.name, type: direntType(e) }));
    });
  }

  /** mkdir(2); the process umask applies, so callers that need an exact mode chmod afterwards. */
  async mkdir(rel: string, mode: number): Promise<void> {
    await this.changing(() => this.inParent(rel, (at) => fsp.mkdir(at, { mode })));
  }

  /**
   * mknod(2) of a FIFO, socket or device node (hostIo: Node has no mknod). Device nodes are only ever made
   * inside the delta's root-only upper tree and never opened by the worker (see delta/README.md).
   */
  async mknod(rel: string, mode: number, rdev: number | bigint): Promise<void> {
    await this.changing(() =>
      this.inParent(rel, (at) => {
        hostIo.mknod(at, mode, rdev);
        return Promise.resolve();
      }),
    );
  }

  /** lchown(2) of `rel` itself (a symlink is changed, not followed); -1 leaves an id unchanged. */
  async lchown(rel: string, uid: number, gid: number): Promise<void> {
    if (rel === '') {
      await fsp.chown(fdPath(this.root.handle.fd), uid, gid);
      return;
    }
    await this.inParent(rel, (at) => fsp.lchown(at, uid, gid));
  }

  /** mkfifo(3) (special-nodes.ts). */
  async mkfifo(rel: string, mode: number): Promise<void> {
    await this.changing(() => this.inParent(rel, (_at, dirFd, name) => makeFifo(dirFd, name, mode)));
  }

  /** A Unix socket node at `rel` (special-nodes.ts). */
  async mksock(rel: string, mode: number): Promise<void> {
    await this.inParent(rel, (at, dirFd) => makeSocket(dirFd, at, mode));
  }

  /** unlink(2) of a non-directory. */
  async unlink(rel: string): Promise<void> {
    await this.changing(() => this.inParent(rel, (at) => fsp.unlink(at)));
  }

  /** rmdir(2); cached fds at and below `rel` are invalidated. */
  async rmdir(rel: string): Promise<void> {
    await this.changing(() => this.inParent(rel, (at) => fsp.rmdir(at)));
    await this.cache.invalidate(rel);
  }

  /** symlink(2): stores `target` verbatim; nothing ever resolves it on the host. */
  async symlink(target: string, rel: string): Promise<void> {
    await this.changing(() => this.inParent(rel, (at) => fsp.symlink(target, at)));
  }

  /** readlink(2) of `rel` itself. */
  async readlink(rel: string): Promise<string> {
    return this.inParent(rel, (at) => fsp.readlink(at));
  }

  /** chmod through an O_PATH|O_NOFOLLOW fd's magic link (Linux has no lchmod; a symlink gives ENOTSUP). */
  async chmod(rel: string, mode: number): Promise<void> {
    const handle = rel === '' ? null : await this.open(rel, PATH_ONLY_FLAGS);
    try {
      await fsp.chmod(fdPath(handle === null ? this.root.handle.fd : handle.fd), mode & 0o7777);
    } finally {
      await handle?.close();
    }
  }

  /**
   * Sets atime/mtime (nanoseconds since the epoch, 'now', or undefined = unchanged) with
   * utimensat(AT_SYMLINK_NOFOLLOW): exact to the nanosecond (Node's utimes takes fractional seconds, which
   * a double cannot hold to the nanosecond), and works on symlinks.
   */
  async utimes(rel: string, atime: TimeSpec, mtime: TimeSpec): Promise<void> {
    const [aSec, aNsec] = timespec(atime);
    const [mSec, mNsec] = timespec(mtime);
    if (rel === '') {
      hostIo.lutimens(fdPath(this.root.handle.fd), aSec, aNsec, mSec, mNsec);
      return;
    }
    await this.inParent(rel, (at) => {
      hostIo.lutimens(at, aSec, aNsec, mSec, mNsec);
      return Promise.resolve();
    });
  }

  /** ftruncate through an fd opened O_WRONLY|O_NOFOLLOW; sizes above 2^53 exact (bigint). */
  async truncate(rel: string, size: number | bigint): Promise<void> {
    const handle = await this.open(rel, constants.O_WRONLY);
    try {
      if (typeof size === 'bigint') hostIo.ftruncate(handle.fd, size);
      else await handle.truncate(size);
    } finally {
      await handle.close();
    }
  }

  /** rename(2) within this root or into another root on the same filesystem (EXDEV otherwise). */
  async rename(fromRel: string, to: HostLocation): Promise<void> {
    await this.changing(() =>
      to.dir.changing(() =>
        this.inParent(fromRel, (fromAt) => to.dir.inParent(to.rel, (toAt) => fsp.rename(fromAt, toAt))),
      ),
    );
    // The moved directory's cached fds would answer for its old path: drop them, and whatever the
    // destination replaced.
    await this.cache.invalidate(fromRel);
    await to.dir.cache.invalidate(to.rel);
  }

  /** link(2) (never dereferences a symlink source on Linux) from `fromRel` to another location. */
  async link(fromRel: string, to: HostLocation): Promise<void> {
    await to.dir.changing(() =>
      this.inParent(fromRel, (fromAt) => to.dir.inParent(to.rel, (toAt) => fsp.link(fromAt, toAt))),
    );
  }

  /**
   * Removes `rel` and everything below it, never following a symlink; a missing path is not an error.
   * Walks with directory fds (walk.ts), so no depth or name length is too much.
   */
  async removeTree(rel: string): Promise<void> {
    if (rel === '') throw new TypeError('removeTree of the root itself');
    await this.changing(async () => {
      try {
        await this.inParent(rel, (at) => removeTreeAt(at));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    });
    await this.cache.invalidate(rel);
  }

  /**
   * Runs `fn` with a magic path for `rel` inside its parent directory: `/proc/self/fd/<parentFd>/<name>`.
   * The parent fd is held (not closable) until `fn` settles.
   */
  private async inParent<T>(
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
  private async withDir<T>(rel: string, fn: (dir: CachedDir) => Promise<T>): Promise<T> {
    const dir = await this.acquireDir(splitRel(rel));
    try {
      return await fn(dir);
    } finally {
      await this.cache.release(dir);
    }
  }

  /** The directory made of `parts`, with a reference taken: cache hit, else a walk from the deepest hit. */
  private async acquireDir(parts: readonly string[]): Promise<CachedDir> {
    if (this.closed) throw new Error(`HostDir ${this.path} used after close`);
    if (parts.length === 0) return this.root;
    const hit = this.cache.acquire(parts.join('/'));
    if (hit !== undefined) return hit;
    // The deepest cached ancestor: the parent or grandparent usually (a walk or a create); past that,
    // from the root down while the cache hits (a path whose ancestors do not exist here, as in the
    // codebase layer below a directory the sandbox made). Either way O(depth) cache probes at most, not
    // O(depth) probes per level: a 3000-level path costs a few probes, not millions of hashed prefixes.
    let depth = parts.length - 1;
    let cur: CachedDir | undefined;
    const nearest = Math.max(1, parts.length - 3);
    for (; depth >= nearest && cur === undefined; depth--) {
      cur = this.cache.acquire(parts.slice(0, depth).join('/'));
    }
    if (cur !== undefined) {
      depth++;
    } else {
      cur = this.root;
      depth = 0;
      let prefix = '';
      for (; depth < nearest; depth++) {
        prefix = prefix === '' ? (parts[0] as string) : `${prefix}/${parts[depth] as string}`;
        const next = this.cache.acquire(prefix);
        if (next === undefined) break;
        await this.cache.release(cur);
        cur = next;
      }
    }
    for (; depth < parts.length; depth++) {
      const parent: CachedDir = cur;
      try {
        const handle = await fsp.open(`${fdPath(parent.handle.fd)}/${parts[depth]}`, WALK_DIR_FLAGS);
        cur = this.cache.insert(parts.slice(0, depth + 1).join('/'), handle);
      } finally {
        await this.cache.release(parent);
      }
    }
    return cur;
  }
}

function direntType(
  entry: Pick<Stats, 'isFile' | 'isDirectory' | 'isSymbolicLink' | 'isFIFO'>,
): HostEntryType {
  if (entry.isFile()) return 'file';
  if (entry.isDirectory()) return 'directory';
  if (entry.isSymbolicLink()) return 'symlink';
  if (entry.isFIFO()) return 'fifo';
  return 'other';
}
