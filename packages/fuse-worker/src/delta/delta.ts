// The copy-on-write overlay of one sandbox: a read-only codebase (lower) plus this sandbox's delta.
import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

import type { ChangeEntry } from '@agentfense/protocol';

import { FsError, guard, guardSync } from '../errors.js';
import type { HostDir } from '../host/host-dir.js';
import type { HostFile, WritableFile } from '../host/raw-file.js';
import { createFile, makeDir, type NewOwner } from '../host/sync-make.js';
import { warmInode } from '../host/warm.js';
import { commitChanges } from './commit.js';
import {
  chargeNew,
  mergedEntries,
  mergedIsEmpty,
  mustResolve,
  upperKnownAbsent,
  resolve,
  resolveIfCached,
  type DeltaContext,
} from './context.js';
import { copyUp } from './copy-up.js';
import { buildDiff, diffItems, type DiffItem } from './diff.js';
import { discardPaths } from './discard.js';
import { fastCreateSink, fastDirOf, type FastCreateSink, type FastDir } from './fast-dir.js';
import type { FrozenStack } from './frozen-stack.js';
import { LayerSwitch } from './layer-switch.js';
import { keepOpenIfCached, type KeptFile } from './keep-open.js';
import { AsyncLock } from './lock.js';
import type { DiskQuota } from './quota.js';
import { openDelta } from './open.js';
import { selected, toRel } from './paths.js';
import { prepareCreate, removeEntry } from './records.js';
import { linkAt, mknodAt, mksockAt, setattrAt, setattrIfCached } from './entry-ops.js';
import { openReadHandleAt } from './read-handle.js';
import { renameEntry } from './rename.js';
import { writableBytes } from './layer-bytes.js';
import type {
  CommitOptions,
  DeltaCommitResult,
  DeltaDiff,
  DeltaDirEntry,
  DeltaLookup,
  DeltaOpenOptions,
  PathFilter,
  RenameOptions,
  SetattrOptions,
} from './types.js';

/**
 * One sandbox's overlay. All paths are codebase paths ('/' is the root), already validated and
 * permission-checked by the caller. Namespace changes run one at a time (AsyncLock); lookups, listings and
 * reads do not wait for them. Errors are FsError with the errno the FUSE op should return.
 */
export class Delta {
  /**
   * Replaced whole (never patched) by a checkpoint or a restore. A lookup or read that does not take the
   * lock and started before may still use the old one's objects: after a checkpoint they show the same view.
   */
  private ctx: DeltaContext;
  private readonly hostDirs: readonly HostDir[];
  private readonly lock = new AsyncLock();
  readonly #layers: LayerSwitch;

  private constructor(opened: {
    ctx: DeltaContext;
    hostDirs: readonly HostDir[];
    stack: FrozenStack;
    deltaDir: string;
  }) {
    this.ctx = opened.ctx;
    this.hostDirs = opened.hostDirs;
    this.#layers = new LayerSwitch({ deltaDir: opened.deltaDir, stack: opened.stack });
    // What a restore dropped before a process death (trash.ts).
    this.#layers.emptyTrashLater(this.ctx.logger);
  }

  /** Opens (or creates) the delta at `deltaDir` over `lowerDir`, restoring everything a previous worker left. */
  static async open(options: DeltaOpenOptions): Promise<Delta> {
    return new Delta(await openDelta(options));
  }

  /**
   * Bumped when a checkpoint or restore begins. A writable fd (openForWrite, create, openToKeep) opened
   * under an older value may name a file that is now a frozen layer's (or gone): its holder closes it
   * and opens the path again.
   */
  get layerEpoch(): number {
    return this.#layers.epoch;
  }

  /** Called synchronously as a checkpoint or restore begins: the FUSE layer closes its writable fds. */
  set onLayerChange(hook: (() => void) | undefined) {
    this.#layers.onLayerChange = hook;
  }
  get onLayerChange(): (() => void) | undefined {
    return this.#layers.onLayerChange;
  }

  /** The frozen layers below the writable one, oldest first (absolute directories); [] when none. */
  get frozenLayers(): readonly string[] {
    return this.#layers.frozenLayers;
  }

  /** The disk quota on this delta, or null (no limit). */
  get quota(): DiskQuota | null {
    return this.ctx.quota;
  }

  /** The codebase root's fd and, for a directory only the writable layer holds, where it is (fast-dir.ts). */
  get codebaseRootFd(): number {
    return this.ctx.codebase.rootFd;
  }
  fastDir(path: string): FastDir | null {
    return fastDirOf(this.ctx, path);
  }
  readonly fastCreates: FastCreateSink = fastCreateSink(() => this.ctx);

  /**
   * Settles when the trash (what restores dropped) has been removed, as far as asked until now. In the
   * background; a failure is logged and left for the next open or restore.
   */
  trashEmptied(): Promise<void> {
    return this.#layers.trashEmptied();
  }

  /** Closes the journal and every fd, once the trash's removal under way is over. Not required for durability (see journal.ts). */
  async close(): Promise<void> {
    await this.#layers.trashEmptied();
    await this.lock.run(async () => {
      await this.ctx.journal.close();
      await this.ctx.upper.close();
      await this.#layers.close();
      for (const dir of this.hostDirs) await dir.close();
    });
  }

  /**
   * Freezes the writable layer into the new directory `layerDir` (on the delta's filesystem) and goes on
   * with an empty writable layer over it; the view does not change. O(1) in data (renames); crash-safe
   * (layer-change.ts). Writable fds handed out before must be closed first (onLayerChange).
   */
  async checkpoint(options: { layerDir: string }): Promise<{ bytes: number | null }> {
    return this.mutate('checkpoint', async () => {
      // Counted under the lock, so no write slips between the count and the freeze (layer-bytes.ts).
      const bytes = await writableBytes(this.ctx.quota);
      this.ctx = await this.#layers.checkpoint(this.ctx, options.layerDir);
      if (this.ctx.quota !== null) this.ctx.quota.frozen += bytes ?? 0; // until the control plane's total
      await this.recount();
      return { bytes };
    });
  }

  /**
   * Drops the writable layer's content (an unfinished commit included) and makes `frozen` (oldest first)
   * the stack: a prefix of the current one rolls back to a checkpoint. Crash-safe (layer-change.ts).
   */
  async restore(options: { frozen: readonly string[] }): Promise<void> {
    await this.mutate('restore', async () => {
      this.ctx = await this.#layers.restore(this.ctx, options.frozen);
      await this.recount();
    });
  }

  /** Replaces the adjacent frozen layers `from` with `to`, merged from them: the view is unchanged. */
  async compactLayers(o: { from: readonly [string, string]; to: string }): Promise<boolean> {
    return this.mutate('compact', async () => {
      const next = await this.#layers.compact(this.ctx, o.from, o.to);
      if (next !== null) this.ctx = next;
      return next !== null;
    });
  }

  /**
   * lookup() answered synchronously when nothing it needs takes a thread-pool trip (resolveIfCached:
   * a codebase entry under a cached directory fd); undefined otherwise, then call lookup().
   */
  lookupIfCached(path: string): DeltaLookup | null | undefined {
    try {
      const rel = toRel(path);
      const found = resolveIfCached(this.ctx, rel);
      if (found === undefined || found === null || !this.#copiedDir(rel, found)) return found;
      const lo = this.ctx.lower.lstatIfCached(rel);
      if (lo === undefined) return undefined;
      return lo?.isDirectory() === true ? { ...found, lower: { dev: lo.dev, ino: lo.ino } } : found;
    } catch {
      return undefined; // lookup() reports it, through guard()
    }
  }

  /**
   * An upper directory without a base is structure copied from the codebase directory to hold a new
   * child: it is still that directory, so it keeps its identity (st_ino must not change when a file is
   * created inside; find/rm -r compare directory inode numbers while they walk).
   */
  #copiedDir(rel: string, found: DeltaLookup): boolean {
    return (
      found.layer === 'upper' &&
      found.type === 'directory' &&
      found.lower === null &&
      rel !== '' &&
      !this.ctx.meta.hasBase(rel) &&
      !this.ctx.meta.isHidden(rel)
    );
  }

  /** Caches the codebase directory `path`'s fd if its parent's is: lookups inside it come next. */
  cacheLowerDir(path: string): void {
    this.ctx.lower.cacheDirSync(toRel(path));
  }

  /**
   * Whether directory `found` (at `path`) is known without a listing to have no subdirectories: a codebase
   * directory that is not in the delta (so nothing was added below it) and whose host link count says it
   * has none, on a filesystem where that count is exact. False means "list it to know".
   */
  knownNoSubdirs(path: string, found: DeltaLookup): boolean {
    return (
      path !== '/' && // the root is in both layers
      found.layer === 'lower' &&
      found.type === 'directory' &&
      found.stat.nlink === 2n &&
      this.ctx.lower.nlinkCountsSubdirs
    );
  }

  async lookup(path: string): Promise<DeltaLookup | null> {
    return guard(`lookup ${path}`, async () => {
      const rel = toRel(path);
      const found = await resolve(this.ctx, rel);
      if (found !== null && this.#copiedDir(rel, found)) {
        const lo = await this.ctx.lower.lstatOrNull(rel);
        if (lo?.isDirectory() === true) return { ...found, lower: { dev: lo.dev, ino: lo.ino } };
      }
      return found;
    });
  }

  /** The merged listing of directory `path` (upper entries win, whiteouts removed, opaque dirs hide lower). */
  async readdir(path: string): Promise<DeltaDirEntry[]> {
    return guard(`readdir ${path}`, async () => {
      const entries = await mergedEntries(this.ctx, toRel(path));
      return [...entries].map(([name, type]) => ({ name, type }));
    });
  }

  /** Opens the serving layer's file for reading (O_NOFOLLOW; extra flags such as O_NONBLOCK allowed). */
  async openForRead(path: string, flags = constants.O_RDONLY): Promise<FileHandle> {
    return guard(`open ${path}`, async () => {
      const rel = toRel(path);
      const found = await mustResolve(this.ctx, rel);
      const layer = found.layer === 'upper' ? this.ctx.upper : this.ctx.lower;
      return layer.open(rel, flags & ~(constants.O_CREAT | constants.O_TRUNC));
    });
  }

  /** Whether the codebase layer serves `path`, known without a syscall (not in upper, not whited out). */
  servedFromLower(path: string): boolean {
    const rel = toRel(path);
    return upperKnownAbsent(this.ctx, rel) && !this.ctx.meta.isHidden(rel);
  }

  /** HostDir.withCachedDir on the codebase layer's directory `path` (the read-ahead's files are in it). */
  withLowerDir<T>(path: string, use: (dirFd: number) => Promise<T>): Promise<T> | undefined {
    return this.ctx.lower.withCachedDir(toRel(path), use);
  }

  /**
   * Brings the codebase entries `names` of directory `path` into the host's inode cache from the thread
   * pool (the entry warm-up's listings: the lookups that follow then never wait for the disk on the JS
   * thread). Never rejects.
   */
  async warmEntries(path: string, names: readonly string[]): Promise<void> {
    const rel = toRel(path);
    await Promise.all(names.map((name) => warmInode(this.ctx.lower, rel, name)));
  }

  /** A regular file's read-only host file for the data ops (read-handle.ts). */
  async openReadHandle(path: string): Promise<HostFile> {
    return guard(`open ${path}`, () => openReadHandleAt(this.ctx, path));
  }

  /**
   * Opens the file serving `path` to keep an unlinked-but-open file usable: read-write when it is the
   * sandbox's own (upper) file, read-only when it is the codebase's (which is never written outside commit).
   */
  async openToKeep(path: string): Promise<{ handle: FileHandle; writable: boolean }> {
    // Under the lock: a writable fd of the writable layer never opens while a checkpoint freezes it.
    return this.mutate(`open ${path}`, async () => {
      const rel = toRel(path);
      const found = await mustResolve(this.ctx, rel);
      if (found.type !== 'file') throw new FsError('EINVAL', `not a regular file: ${path}`);
      if (found.layer === 'upper')
        return { handle: await this.ctx.upper.open(rel, constants.O_RDWR), writable: true };
      return { handle: await this.ctx.lower.open(rel, constants.O_RDONLY), writable: false };
    });
  }

  /** openToKeep() at once where no change is queued or running and its fds are cached; else undefined. */
  openToKeepIfIdle(path: string): KeptFile | undefined {
    return this.lock.idle && this.#layers.broken === null ? keepOpenIfCached(this.ctx, path) : undefined;
  }

  /** Copies `path` up (unless O_TRUNC makes the content moot) and opens the upper file with `flags`. */
  async openForWrite(path: string, flags: number): Promise<FileHandle> {
    return this.mutate(`open ${path}`, async () => {
      const rel = toRel(path);
      const found = await mustResolve(this.ctx, rel);
      if (found.type === 'directory') throw new FsError('EISDIR', path);
      if (found.type === 'symlink') throw new FsError('ELOOP', path);
      await copyUp(this.ctx, rel, { content: (flags & constants.O_TRUNC) === 0 });
      return this.ctx.upper.open(rel, flags & ~(constants.O_CREAT | constants.O_EXCL));
    });
  }

  /** Creates a regular file (EEXIST if anything is there) and opens it with `flags`. */
  async create(
    path: string,
    mode: number,
    flags: number = constants.O_RDWR,
    owner?: NewOwner,
  ): Promise<WritableFile> {
    return this.mutate(`create ${path}`, async () => {
      const rel = await prepareCreate(this.ctx, path);
      let opened: WritableFile | undefined;
      // Owned by the caller from the start (a chown afterwards would be a second namespace change).
      await chargeNew(this.ctx, rel, 0, async () => {
        opened = await createFile(this.ctx.upper, rel, flags, mode, owner);
      });
      return opened as WritableFile;
    });
  }

  /**
   * Creates a directory; over a whiteout it is opaque (starts empty). With `owner`, it is the caller's
   * from the start. Synchronously where the parent's fd is cached (host/sync-make.ts).
   */
  async mkdir(path: string, mode: number, owner?: NewOwner): Promise<void> {
    await this.mutate(`mkdir ${path}`, async () => {
      const rel = await prepareCreate(this.ctx, path);
      await chargeNew(this.ctx, rel, 0, () => makeDir(this.ctx.upper, rel, mode, owner));
    });
  }

  /**
   * Creates a FIFO or a character/block device node. A device node is inert metadata: it lives only in
   * the delta's root-only upper tree, the worker never opens anything but regular files, the mount is
   * nodev, and commit never writes it to the codebase (reported as skipped).
   */
  async mknod(path: string, mode: number, rdev: number | bigint = 0): Promise<void> {
    await this.mutate(`mknod ${path}`, () => mknodAt(this.ctx, path, mode, rdev));
  }

  /** Creates a Unix socket node (what bind(2) makes; never synced back on commit). */
  async mksock(path: string, mode: number): Promise<void> {
    await this.mutate(`mksock ${path}`, () => mksockAt(this.ctx, path, mode));
  }

  /** Creates a symlink storing `target` verbatim (only the sandbox's kernel ever resolves it). */
  async symlink(target: string, path: string): Promise<void> {
    await this.mutate(`symlink ${path}`, async () => {
      const rel = await prepareCreate(this.ctx, path);
      await chargeNew(this.ctx, rel, target.length, () => this.ctx.upper.symlink(target, rel));
    });
  }

  /** The target of the symlink at `path` (EINVAL if it is not one). */
  async readlink(path: string): Promise<string> {
    return guard(`readlink ${path}`, async () => {
      const rel = toRel(path);
      const found = await mustResolve(this.ctx, rel);
      if (found.type !== 'symlink') throw new FsError('EINVAL', `not a symlink: ${path}`);
      return (found.layer === 'upper' ? this.ctx.upper : this.ctx.lower).readlink(rel);
    });
  }

  /** Hard link inside the upper layer (copy-up first: a link never reaches into the codebase). */
  async link(existing: string, newPath: string): Promise<void> {
    await this.mutate(`link ${existing} ${newPath}`, () => linkAt(this.ctx, existing, newPath));
  }

  /** Removes a non-directory; a codebase entry becomes a whiteout. */
  async unlink(path: string): Promise<void> {
    await this.mutate(`unlink ${path}`, async () => {
      const rel = toRel(path);
      const found = await mustResolve(this.ctx, rel);
      if (found.type === 'directory') throw new FsError('EISDIR', path);
      await removeEntry(this.ctx, rel, found);
    });
  }

  /**
   * Removes a directory that is empty in the merged view. Invariant: refused with ENOTEMPTY while the merged
   * directory has ANY entry, including ones the caller hides from the sandbox, so hidden content is never
   * deleted.
   */
  async rmdir(path: string): Promise<void> {
    await this.mutate(`rmdir ${path}`, async () => {
      const rel = toRel(path);
      if (rel === '') throw new FsError('EBUSY', 'the root');
      const found = await mustResolve(this.ctx, rel);
      if (found.type !== 'directory') throw new FsError('ENOTDIR', path);
      if (!(await mergedIsEmpty(this.ctx, rel))) throw new FsError('ENOTEMPTY', path);
      await removeEntry(this.ctx, rel, found);
    });
  }

  /**
   * rename(2)/renameat2(2). A non-directory from the codebase is copied up, renamed in the upper layer and
   * whited out at its old path. A directory may move only if the sandbox added it (no codebase content at
   * or below it); anything else is EXDEV, so tools fall back to copy + delete (no redirect metadata).
   */
  async rename(from: string, to: string, options: RenameOptions = {}): Promise<void> {
    await this.mutate(`rename ${from} ${to}`, () => renameEntry(this.ctx, from, to, options));
  }

  /** Changes attributes (copy-up first). size 0 skips copying the content. */
  async setattr(path: string, attrs: SetattrOptions): Promise<void> {
    await this.mutate(`setattr ${path}`, () => setattrAt(this.ctx, path, attrs));
  }

  /** setattr() done at once when no change is queued or running and nothing needs the pool; else false. */
  setattrIfIdle(path: string, attrs: SetattrOptions): boolean {
    if (!this.lock.idle || this.#layers.broken !== null) return false;
    return guardSync(`setattr ${path}`, () => setattrIfCached(this.ctx, path, attrs));
  }

  /** The change set: added / modified / deleted entries with sizes, sorted by path. */
  async changes(filter: PathFilter = {}): Promise<ChangeEntry[]> {
    return this.mutate('changes', async () => {
      const all = await this.#layers.changeSet(this.ctx);
      return all.filter((c) => selected(c.rel, filter.paths)).map((c) => c.entry);
    });
  }

  /** Unified diff (`diff -u` style, a/ b/ prefixes) of the changed text files; binary files listed apart. */
  async diff(filter: PathFilter = {}): Promise<DeltaDiff> {
    return this.mutate('diff', async () => {
      const chosen = (await this.#layers.changeSet(this.ctx)).filter((c) => selected(c.rel, filter.paths));
      return buildDiff(this.ctx, chosen);
    });
  }

  /** The diff file by file: the change set taken under the lock, each text read when asked for. */
  async diffItems(filter: PathFilter = {}): Promise<AsyncIterator<DiffItem>> {
    const changes = await this.mutate('diff', async () => {
      const all = await this.#layers.changeSet(this.ctx);
      return all.filter((c) => selected(c.rel, filter.paths));
    });
    return diffItems(this.ctx, changes);
  }

  /** Applies the change set to the codebase, atomically per file (commit.ts); a stack is flattened first. */
  async commit(options: CommitOptions): Promise<DeltaCommitResult> {
    return this.mutate('commit', async () => {
      this.ctx = await this.#layers.flatten(this.ctx);
      const result = await commitChanges(this.ctx, options);
      await this.ctx.journal.compact(this.ctx.meta);
      await this.recount();
      return result;
    });
  }

  /**
   * Drops the delta (or the given paths and everything below them); works on a full filesystem. With
   * frozen layers a discard of everything empties the writable layer (the checkpoints stay); a discard of
   * some paths flattens the stack first (then `frozenLayers` is []).
   */
  async discard(filter: PathFilter = {}): Promise<void> {
    await this.mutate('discard', async () => {
      const everything = filter.paths === undefined || filter.paths.some((p) => toRel(p) === '');
      if (!everything) this.ctx = await this.#layers.flatten(this.ctx);
      await discardPaths(this.ctx, filter.paths ?? ['/']);
      await this.recount();
    });
  }

  /** Recounts the quota from the upper tree after commit/discard removed entries wholesale. */
  private async recount(): Promise<void> {
    const { quota, upper, logger } = this.ctx;
    await quota?.rescan(upper, (err) => logger.warn({ err }, 'disk quota: counting the delta failed'));
  }

  /** Runs a namespace change under the lock, with errors as FsError. */
  private mutate<T>(what: string, fn: () => Promise<T>): Promise<T> {
    // No closure more than a plain guarded run: every create and write passes here.
    return this.lock.run(() => (this.#layers.broken === null ? guard(what, fn) : this.#refuseBroken(what)));
  }

  #refuseBroken(what: string): Promise<never> {
    const cause = this.#layers.broken?.message ?? '';
    return Promise.reject(
      new FsError(
        'EIO',
        `${what}: an interrupted checkpoint or restore is unfinished (${cause}): reopen the delta`,
      ),
    );
  }
}
