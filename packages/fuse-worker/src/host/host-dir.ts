// A root directory opened once, and every filesystem operation below it without following any symlink.
import type { BigIntStats, Stats } from 'node:fs';
import {
  chmodSync,
  closeSync,
  constants,
  linkSync,
  lchownSync,
  lstatSync,
  openSync,
  opendirSync,
  renameSync,
  rmdirSync,
  statfsSync,
  symlinkSync,
  unlinkSync,
} from 'node:fs';
import fsp from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';

import { hostIo } from '@agentfense/fuse-native';

import { DirFdCache } from './dir-fd-cache.js';
import { DirTree } from './dir-tree.js';
import { fdPath, PATH_ONLY_FLAGS, WALK_DIR_FLAGS } from './flags.js';
import { isMissing, timespec, type TimeSpec } from './host-values.js';
import { RawFile, type HostFile } from './raw-file.js';
import { makeFifo, makeSocket } from './special-nodes.js';
import { POOL_UNLINK_BYTES, removeTree as removeTreeAt } from './walk.js';

export { isMissing, timespec, type TimeSpec } from './host-values.js';

/** Type of a directory entry as the host reports it (d_type). */
export type HostEntryType = 'file' | 'directory' | 'symlink' | 'fifo' | 'other';

/** One entry of a host directory listing. */
export interface HostDirent {
  readonly name: string;
  readonly type: HostEntryType;
}

export interface HostDirOptions {
  /** Absolute path of the root. Its own last component must not be a symlink (it is trusted config). */
  readonly path: string;
  /** The root already opened (a codebase: pinned-dir.ts, no symlink in any component); else `path` is. */
  readonly root?: FileHandle;
  /** Directory fds kept open (default 256). */
  readonly cacheCapacity?: number;
  /** Re-open cached directory fds older than this (default Infinity; see DirFdCache). */
  readonly cacheMaxAgeMs?: number;
  /**
   * Remember directories a walk found missing for this long (absent-dirs.ts); default: not at all. For a
   * tree other processes change, where a name is re-checked after `cacheMaxAgeMs` anyway.
   */
  readonly rememberMissingMs?: number;
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
export class HostDir extends DirTree {
  /** Opens `options.path` as a root (O_DIRECTORY|O_NOFOLLOW on its last component). */
  static async open(options: HostDirOptions): Promise<HostDir> {
    const root = options.root ?? (await fsp.open(options.path, WALK_DIR_FLAGS));
    return HostDir.#over(options, root);
  }

  /**
   * HostDir.open with the root opened synchronously, on the worker's thread: for a directory of the
   * worker's own just made or renamed (a checkpoint's new trees), whose path walk finds every name in
   * the dentry cache and cannot wait on the disk, while a thread-pool trip waits 1-7 ms right after a
   * `sync` on a loaded host. The same flags (no symlink as its last component).
   */
  static openNow(options: Omit<HostDirOptions, 'root'>): HostDir {
    return HostDir.#over(options, new RawFile(openSync(options.path, WALK_DIR_FLAGS)));
  }

  static #over(options: HostDirOptions, root: HostFile): HostDir {
    let fsType: number;
    try {
      // Through the fd's magic link: exactly the filesystem of the directory opened, whatever the path
      // names by now. Synchronous: statfs reads counters in memory, and a thread-pool trip costs
      // milliseconds on a loaded host (a checkpoint opens two roots).
      fsType = statfsSync(fdPath(root.fd)).type;
    } catch {
      fsType = 0;
    }
    const self: { dir?: HostDir } = {};
    const cache = new DirFdCache({
      capacity: options.cacheCapacity ?? 256,
      maxAgeMs: options.cacheMaxAgeMs ?? Number.POSITIVE_INFINITY,
      stillCurrent: (rel, entry) => self.dir?.stillCurrent(rel, entry) ?? false,
    });
    self.dir = new HostDir(options.path, root, cache, fsType, options.rememberMissingMs);
    return self.dir;
  }

  /**
   * lstat of `rel` ('' is the root): never follows the final component either. When the parent's fd is
   * cached (the common case) the lstat is synchronous: a metadata lookup in a cached directory takes a
   * few µs, while a trip through libuv's thread pool costs 30-40 µs on this machine, on every FUSE
   * lookup/getattr. A miss walks asynchronously as before.
   */
  async lstat(rel: string): Promise<BigIntStats> {
    if (rel === '') return this.rootFile.stat({ bigint: true });
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
      return this.inCachedParent(
        rel,
        (at) => lstatSync(at, { bigint: true, throwIfNoEntry: false }) ?? null,
        () => null,
      );
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

  /** Entries of directory `rel` ('' is the root) with their d_type, unsorted. */
  async readdir(rel: string): Promise<HostDirent[]> {
    return this.withDir(rel, async (dir) => {
      const entries = await fsp.readdir(fdPath(dir.handle.fd), { withFileTypes: true });
      return entries.map((e) => ({ name: e.name, type: direntType(e) }));
    });
  }

  /** Whether directory `rel` ('' is the root) has any entry: its first one read, synchronously if cached. */
  async hasEntries(rel: string): Promise<boolean> {
    const firstOf = (path: string): boolean => {
      const dir = opendirSync(path, { bufferSize: 32 });
      try {
        return dir.readSync() !== null;
      } finally {
        dir.closeSync();
      }
    };
    const cached = this.closed ? undefined : rel === '' ? this.root : this.cache.acquire(rel);
    if (cached !== undefined) {
      try {
        return firstOf(fdPath(cached.handle.fd));
      } finally {
        if (cached !== this.root) this.cache.releaseNow(cached);
      }
    }
    return this.withDir(rel, async (dir) => {
      const handle = await fsp.opendir(fdPath(dir.handle.fd), { bufferSize: 32 });
      try {
        return (await handle.read()) !== null;
      } finally {
        await handle.close();
      }
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
    if (this.inCachedParent(rel, (at) => done(lchownSync(at, uid, gid)))) return;
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
    // On the spot unless the file has blocks to free (walk.ts POOL_UNLINK_BYTES): then in the pool.
    const unlinked = this.changeSyncIfCached(rel, (at) => {
      const st = lstatSync(at, { bigint: true });
      return st.blocks * 512n < POOL_UNLINK_BYTES || st.nlink > 1n ? done(unlinkSync(at)) : false;
    });
    if (unlinked === true) return;
    await this.changing(() => this.inParent(rel, (at) => fsp.unlink(at)));
  }

  /** rmdir(2); cached fds at and below `rel` are invalidated. */
  async rmdir(rel: string): Promise<void> {
    if (!this.changeSyncIfCached(rel, (at) => done(rmdirSync(at)))) {
      await this.changing(() => this.inParent(rel, (at) => fsp.rmdir(at)));
    }
    await this.cache.invalidate(rel);
  }

  /** symlink(2): stores `target` verbatim; nothing ever resolves it on the host. */
  async symlink(target: string, rel: string): Promise<void> {
    if (this.changeSyncIfCached(rel, (at) => done(symlinkSync(target, at)))) return;
    await this.changing(() => this.inParent(rel, (at) => fsp.symlink(target, at)));
  }

  /** readlink(2) of `rel` itself. */
  async readlink(rel: string): Promise<string> {
    return this.inParent(rel, (at) => fsp.readlink(at));
  }

  /** chmod through an O_PATH|O_NOFOLLOW fd's magic link (Linux has no lchmod; a symlink gives ENOTSUP). */
  async chmod(rel: string, mode: number): Promise<void> {
    if (this.chmodIfCached(rel, mode)) return;
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
    if (this.utimesIfCached(rel, atime, mtime)) return;
    await this.inParent(rel, (at) => {
      hostIo.lutimens(at, aSec, aNsec, mSec, mNsec);
      return Promise.resolve();
    });
  }

  /** chmod() done synchronously where the parent's fd is cached: false on a miss (nothing done). */
  chmodIfCached(rel: string, mode: number): boolean {
    const changed =
      rel !== '' &&
      this.inCachedParent(rel, (at) => {
        const fd = openSync(at, PATH_ONLY_FLAGS);
        try {
          chmodSync(fdPath(fd), mode & 0o7777);
        } finally {
          closeSync(fd);
        }
        return true;
      });
    return changed === true;
  }

  /** utimes() done synchronously where the parent's fd is cached: false on a miss (nothing done). */
  utimesIfCached(rel: string, atime: TimeSpec, mtime: TimeSpec): boolean {
    if (rel === '') return false;
    const [aSec, aNsec] = timespec(atime);
    const [mSec, mNsec] = timespec(mtime);
    const set = (at: string): true => {
      hostIo.lutimens(at, aSec, aNsec, mSec, mNsec);
      return true;
    };
    return this.inCachedParent(rel, set) === true;
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
    const moved = this.changeSyncIfCached(fromRel, (fromAt) =>
      to.dir.changeSyncIfCached(to.rel, (toAt) => {
        // Replacing a file frees its blocks inside rename(2): a big one in the pool, as unlink does.
        const old = lstatSync(toAt, { bigint: true, throwIfNoEntry: false });
        if (old?.isFile() === true && old.nlink === 1n && old.blocks * 512n >= POOL_UNLINK_BYTES)
          return false;
        return done(renameSync(fromAt, toAt));
      }),
    );
    if (moved !== true)
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
    const linked = this.inCachedParent(fromRel, (fromAt) =>
      to.dir.changeSyncIfCached(to.rel, (toAt) => done(linkSync(fromAt, toAt))),
    );
    if (linked === true) return;
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
}

/** True, after a synchronous syscall that returns nothing (the fast paths' "done"). */
function done(_: void): true {
  return true;
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
