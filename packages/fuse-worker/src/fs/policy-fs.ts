// The filesystem a sandbox sees: one handler per low-level FUSE op (like libfuse's passthrough_hp).
// Order inside every op: resolve the node's path -> permission check (contract §2, audited on denial) ->
// copy-on-write resolution in the delta -> host I/O. Handlers return values or throw FsError; the
// binding adapter (binding.ts) owns the reply conventions.
//
// This class is the public face and the op table; each op lives in the file of its concern:
//   lookup.ts         LOOKUP, FORGET
//   attr-ops.ts       GETATTR, SETATTR, READLINK, ACCESS, SETXATTR
//   namespace-ops.ts  MKDIR, MKNOD, SYMLINK, CREATE, UNLINK, RMDIR, RENAME, LINK
//   dir-listing.ts    READDIR
//   readdir-plus.ts   READDIRPLUS (READDIR's entries with their LOOKUP answers)
//   data-ops.ts       READ, WRITE, FALLOCATE, FSYNC (the host handle per node)
//   whole-file.ts     the control plane's readFile/writeFile
//   decisions.ts      permission -> errno, audited (shared by all of the above)
//   kernel-cache.ts   what the kernel may cache and how it is taken back (invalidation, negative entries)
//   core.ts           the state they share
//
// Invariants:
// - A path whose permission is `none` is answered exactly like a path that does not exist (ENOENT),
//   unless it is a directory kept traversable by an exception inside it.
// - Namespace changes (create, mkdir, unlink, rename, link, ...) always reach us (the kernel never caches
//   them), so their checks are exact. Data on the warm path may be served by the kernel's caches; what
//   the kernel enforces there is the mode bits we report (attrs.ts), and rule changes invalidate them.
import { statfsSync } from 'node:fs';
import type { LowLevelFuse } from '@agentfense/fuse-native';
import type { RuleSet } from '@agentfense/protocol';
import { quotaStatfs } from '../delta/quota.js';
import * as attrOps from './attr-ops.js';
import type { FuseAttr } from './attrs.js';
import { FsCore } from './core.js';
import { DataPath } from './data-ops.js';
import { readdir } from './dir-listing.js';
import { readdirplus } from './readdir-plus.js';
import type { HandleCache } from './handles.js';
import { NativeReads } from './native-reads.js';
import { NativeCreates } from './native-creates.js';
import { NativeLookups } from './native-lookups.js';
import { NativeWrites } from './native-writes.js';
import type { InodeTable } from './inodes.js';
import { forget, lookup, type LookupAnswer } from './lookup.js';
import * as namespaceOps from './namespace-ops.js';
import type {
  Caller,
  CreateReply,
  DirEntryOut,
  EntryReply,
  Invalidator,
  Offset,
  PolicyFsOptions,
  SetattrChanges,
  StatfsReply,
} from './types.js';
import { readPath, writePath } from './whole-file.js';
import type { FileBatch } from './store-ahead.js';
import type { EntryWarmup } from './entry-warmup.js';

export type { DirEntryPlusOut } from './readdir-plus.js';
export type {
  Caller,
  CreateReply,
  DirEntryOut,
  EntryReply,
  Invalidator,
  NegativeEntry,
  Offset,
  PolicyFsOptions,
  SetattrChanges,
  StatfsReply,
} from './types.js';

/** The policy-enforcing copy-on-write filesystem of one sandbox. */
export class PolicyFs {
  readonly #core: FsCore;
  readonly #data: DataPath;

  constructor(options: PolicyFsOptions) {
    this.#core = new FsCore(options);
    this.#data = new DataPath(this.#core);
  }

  get inodes(): InodeTable {
    return this.#core.inodes;
  }

  get handles(): HandleCache {
    return this.#core.handles;
  }

  /** Set by the binding once mounted; until then nothing is cached by a kernel. */
  get invalidator(): Invalidator | undefined {
    return this.#core.cache.invalidator;
  }

  set invalidator(invalidator: Invalidator | undefined) {
    this.#core.cache.invalidator = invalidator;
  }

  /** Set by the worker once mounted: the binding's read-ahead of files (store-ahead.ts); none until then. */
  set readAheadFiles(files: FileBatch | undefined) {
    this.#core.storeAhead.files = files;
  }

  /** Whether the read-ahead stores small read-only files into the kernel's page cache (storeAhead feature). */
  set storeAhead(on: boolean) {
    this.#core.storeAhead.storing = on;
  }

  /** Whether a listing sends names the kernel holds fresh as plain entries (freshEntries feature). */
  set freshEntries(on: boolean) {
    this.#core.cache.entries.enabled = on;
  }

  /** Whether files created write-only are answered with direct I/O (directWrites feature). */
  set directWrites(on: boolean) {
    this.#core.directWrites = on;
  }

  /**
   * Lets the binding answer WRITEs on files already decided (nativeWrites feature, native-writes.ts).
   * `callerUid`: besides root, the only uid served (the binding's own check, as in binding.ts).
   */
  useNativeWrites(fuse: Pick<LowLevelFuse, 'fastWrites'>, callerUid: number | undefined): void {
    const core = this.#core;
    const native = new NativeWrites({
      fuse,
      quota: () => core.delta.quota,
      handles: core.handles,
      cache: core.cache,
      stats: core.stats,
    });
    native.callerUid = callerUid;
    core.nativeWrites = native;
    const before = core.handles.beforeClose;
    core.handles.beforeClose = (ino, fd) => {
      native.closing(ino, fd);
      before?.(ino, fd);
    };
    core.delta.quota?.lend(native);
  }

  /**
   * Lets the binding answer READs of files already decided (nativeReads feature, native-reads.ts).
   * `callerUid`: besides root, the only uid served (the binding's own check, as in binding.ts).
   */
  useNativeReads(fuse: Pick<LowLevelFuse, 'fastReads'>, callerUid: number | undefined): void {
    const core = this.#core;
    const native = new NativeReads({
      fuse,
      callerUid,
      noteRead: (ino, offset) => this.#data.noteRead(ino, offset),
      stats: core.stats,
    });
    core.nativeReads = native;
    const before = core.handles.beforeClose;
    core.handles.beforeClose = (ino, fd) => {
      native.closing(ino);
      before?.(ino, fd);
    };
  }

  /**
   * Lets the binding answer LOOKUPs of missing names in directories only the sandbox made (nativeLookups
   * feature, native-lookups.ts). `callerUid`: besides root, the only uid served.
   */
  useNativeLookups(fuse: Pick<LowLevelFuse, 'fastEntries'>, callerUid: number | undefined): void {
    const core = this.#core;
    const native = new NativeLookups({
      fuse,
      codebaseRootFd: core.delta.codebaseRootFd,
      fastDir: (path) => core.delta.fastDir(path),
      rules: () => core.rules,
      pathOf: (ino) => core.inodes.pathOf(ino),
      stInoOf: (ino) => core.inodes.get(ino)?.stIno ?? 0,
      stats: core.stats,
    });
    native.callerUid = callerUid;
    core.nativeLookups = native;
  }

  /**
   * Lets the binding answer CREATEs in the directories the lookup fast path marks (nativeCreates feature,
   * native-creates.ts; after useNativeWrites and useNativeLookups). `callerUid`: besides root, the only uid
   * served.
   */
  useNativeCreates(fuse: Pick<LowLevelFuse, 'fastCreates'>, callerUid: number | undefined): void {
    const core = this.#core;
    const writes = core.nativeWrites;
    if (writes === undefined || core.nativeLookups === undefined) return;
    const native = new NativeCreates({
      fuse,
      core,
      sink: core.delta.fastCreates,
      attrTtl: core.ttl,
      writes,
    });
    native.callerUid = callerUid;
    core.nativeCreates = native;
  }

  /**
   * Lets the binding answer GETATTRs of the directories the lookup fast path marks where the worker would
   * shape nothing (nativeDirAttrs feature; after useNativeCreates, whose reports note them).
   */
  useNativeDirAttrs(): void {
    const core = this.#core;
    if (core.nativeLookups === undefined || core.nativeCreates === undefined) return;
    core.nativeLookups.dirAttrs = true;
    core.nativeCreates.dirAttrs = true;
  }

  /**
   * Lets the binding answer UNLINKs of regular files where it answers CREATEs (nativeUnlinks feature,
   * native-unlinks.ts; after useNativeCreates, whose reports carry them).
   */
  useNativeUnlinks(): void {
    this.#core.nativeCreates?.useUnlinks();
  }

  /**
   * Lets the binding answer RMDIRs of empty directories where it answers UNLINKs (nativeRmdirs feature,
   * native-rmdirs.ts; after useNativeCreates, whose reports carry them).
   */
  useNativeRmdirs(): void {
    this.#core.nativeCreates?.useRmdirs();
  }

  /**
   * Lets the binding answer READDIRPLUS and READDIR of the directories whose GETATTRs it answers
   * (nativeListings feature, native-listings.ts; after useNativeDirAttrs).
   */
  useNativeListings(): void {
    this.#core.nativeCreates?.useListings();
  }

  /** Before the delta changes wholesale (commit, discard, a layer change): no marked directory is served. */
  revokeNativeLookups(): void {
    this.#core.nativeLookups?.revoke();
  }

  /** Counts what the binding answered by itself into the op stats (before `stats` reads them). */
  countNativeOps(): void {
    this.#core.nativeLookups?.count();
    this.#core.nativeCreates?.count();
  }

  /**
   * Requests the binding answered in C since the mount (READs, WRITEs, LOOKUPs, CREATEs, attributes): the
   * sandbox is busy while this moves, though nothing reaches the worker's handlers (entry-warmup.ts).
   */
  get answeredInBinding(): number {
    const c = this.#core;
    return (
      (c.nativeReads?.answered ?? 0) +
      (c.nativeWrites?.answered ?? 0) +
      (c.nativeLookups?.answered ?? 0) +
      (c.nativeCreates?.answered ?? 0)
    );
  }

  /** Set by the worker once mounted with entryWarmup on: lists the tree after the first access. */
  get entryWarmup(): EntryWarmup | undefined {
    return this.#core.warmup;
  }

  set entryWarmup(warmup: EntryWarmup | undefined) {
    this.#core.warmup = warmup;
    // the binding must leave the walker's listings to the worker from its first request on
    if (warmup !== undefined) warmup.onWalkerPid = () => this.#core.nativeCreates?.refresh();
  }

  /** The invalidation generation (bumped by every invalidateAll; entry-warmup.ts stops on a move). */
  get generation(): number {
    return this.#core.cache.generation;
  }

  /** Whether allowed accesses are audited (then nothing may answer for the sandbox ahead of its requests). */
  get auditsAllowed(): boolean {
    return this.#core.audit.allowed;
  }

  /** The mount's path on the host, once mounted (dir-denials.ts locates the mount in a caller's namespace). */
  set mountpoint(mountpoint: string) {
    this.#core.mountpoint = mountpoint;
  }

  /** See KernelCache.noteRead: worth it only when listings are READDIRPLUS. */
  get refreshListingsOnRead(): boolean {
    return this.#core.cache.refreshListingsOnRead;
  }

  set refreshListingsOnRead(on: boolean) {
    this.#core.cache.refreshListingsOnRead = on;
  }

  /** See ListingReplays (listing-replay.ts): off, every listing is built anew. */
  set replayListings(on: boolean) {
    this.#core.cache.replays.enabled = on;
  }

  /** The mount's listings are READDIRPLUS: the read-ahead follows READs (FsCore.readAheadOnRead). */
  get listingsCarryAttributes(): boolean {
    return this.#core.readAheadOnRead;
  }

  set listingsCarryAttributes(on: boolean) {
    this.#core.readAheadOnRead = on;
  }

  /**
   * A change through the mount starts or ends (the binding calls this for every mutating op): remembered
   * listings must not be replayed across it (listing-replay.ts).
   */
  mutated(): void {
    this.#core.cache.replays.mutated();
  }

  get rules(): RuleSet {
    return this.#core.rules;
  }

  /**
   * Replaces the rules and makes the kernel forget every cached decision: attributes (mode bits), data
   * pages, dentries and directory listings of every node it knows. Resolves when the kernel has them.
   */
  async setRules(rules: RuleSet): Promise<void> {
    this.#core.setRules(rules);
    await this.invalidateAll();
  }

  // --- namespace -----------------------------------------------------------------------------------

  /** The answer, or a promise of it where the host must be asked from the thread pool (lookup.ts). */
  lookup(parent: number, name: string, caller: Caller): LookupAnswer | Promise<LookupAnswer> {
    this.#core.warmup?.touch();
    return lookup(this.#core, parent, name, caller);
  }

  forget(ino: number, count: number): void {
    forget(this.#core, ino, count);
  }

  getattr(ino: number, caller: Caller): Promise<FuseAttr> {
    return attrOps.getattr(this.#core, ino, caller);
  }

  /** The new attributes, or a promise of them where the change needs the thread pool (attr-ops.ts). */
  setattr(ino: number, changes: SetattrChanges, caller: Caller): FuseAttr | Promise<FuseAttr> {
    return attrOps.setattr(this.#core, ino, changes, caller);
  }

  readlink(ino: number, caller: Caller): Promise<string> {
    return attrOps.readlink(this.#core, ino, caller);
  }

  mkdir(parent: number, name: string, mode: number, caller: Caller): Promise<EntryReply> {
    return namespaceOps.mkdir(this.#core, parent, name, mode, caller);
  }

  mknod(
    parent: number,
    name: string,
    mode: number,
    rdev: number | bigint,
    caller: Caller,
  ): Promise<EntryReply> {
    return namespaceOps.mknod(this.#core, parent, name, mode, rdev, caller);
  }

  symlink(target: string, parent: number, name: string, caller: Caller): Promise<EntryReply> {
    return namespaceOps.symlink(this.#core, target, parent, name, caller);
  }

  create(parent: number, name: string, mode: number, flags: number, caller: Caller): Promise<CreateReply> {
    return namespaceOps.create(this.#core, parent, name, mode, flags, caller);
  }

  unlink(parent: number, name: string, caller: Caller): Promise<void> {
    return namespaceOps.unlink(this.#core, parent, name, caller);
  }

  rmdir(parent: number, name: string, caller: Caller): Promise<void> {
    return namespaceOps.rmdir(this.#core, parent, name, caller);
  }

  rename(parent: number, name: string, newParent: number, newName: string, caller: Caller): Promise<void> {
    return namespaceOps.rename(this.#core, parent, name, newParent, newName, caller);
  }

  link(ino: number, newParent: number, newName: string, caller: Caller): Promise<EntryReply> {
    return namespaceOps.link(this.#core, ino, newParent, newName, caller);
  }

  /** READDIR from `offset`: at most `max` entries (what could fit the reply), by default all that are left. */
  readdir(ino: number, offset: number, caller: Caller, max?: number): Promise<readonly DirEntryOut[]> {
    this.#core.warmup?.touch();
    return readdir(this.#core, ino, offset, caller, max);
  }

  readdirplus(
    ino: number,
    offset: number,
    caller: Caller,
    fit: (names: readonly string[]) => number,
  ): Promise<Buffer> {
    this.#core.warmup?.touch();
    return readdirplus(this.#core, ino, offset, caller, fit);
  }

  // --- data ------------------------------------------------------------------------------------------

  read(ino: number, size: number, offset: Offset, caller: Caller): Promise<Buffer> {
    return this.#data.read(ino, size, offset, caller);
  }

  readReply(
    ino: number,
    size: number,
    offset: Offset,
    caller: Caller,
    reply: (data: Uint8Array) => void,
  ): Promise<void> {
    return this.#data.readReply(ino, size, offset, caller, reply);
  }

  write(ino: number, data: Buffer, offset: Offset, caller: Caller): Promise<number> {
    return this.#data.write(ino, data, offset, caller);
  }

  /** WRITE in one synchronous step where the file is open; undefined where `write` must serve it. */
  writeIfOpen(ino: number, data: Buffer, offset: Offset, caller: Caller): number | undefined {
    return this.#data.writeIfOpen(ino, data, offset, caller);
  }

  fallocate(ino: number, mode: number, offset: Offset, length: Offset, caller: Caller): Promise<void> {
    return this.#data.fallocate(ino, mode, offset, length, caller);
  }

  fsync(ino: number, datasync: boolean): Promise<void> {
    return this.#data.fsync(ino, datasync);
  }

  // --- misc -------------------------------------------------------------------------------------------

  /**
   * STATFS: the numbers of the filesystem holding the delta (where writes go). Synchronous: one cheap
   * syscall, whereas through the thread pool it queued behind the writes of a tar -x (p50 7-10 ms).
   */
  statfs(): StatfsReply {
    const s = statfsSync(this.#core.statfsPath);
    const quota = this.#core.delta.quota;
    const host = {
      bsize: s.bsize,
      frsize: s.bsize,
      blocks: s.blocks,
      bfree: s.bfree,
      bavail: s.bavail,
      files: s.files,
      ffree: s.ffree,
      favail: s.ffree,
      namemax: 255,
    };
    // With a quota, `df` inside shows the quota as the disk: its size and what is left of it.
    return quota === null ? host : quotaStatfs(quota, host);
  }

  access(ino: number, mask: number, caller: Caller): Promise<void> {
    return attrOps.access(this.#core, ino, mask, caller);
  }

  xattrSet(ino: number, name: string, caller: Caller): never {
    return attrOps.xattrSet(this.#core, ino, name, caller);
  }

  // --- whole-file access for the control plane (library readFile/writeFile) ---------------------------

  readPath(path: string, caller: Caller): Promise<Buffer> {
    return readPath(this.#core, path, caller);
  }

  writePath(path: string, data: Uint8Array, caller: Caller): Promise<void> {
    return writePath(this.#core, path, data, caller);
  }

  /**
   * Makes the kernel forget every cached attribute, page, dentry and listing (after rule changes, a
   * discard, or a write that did not come through the mount). Resolves when the kernel has them.
   */
  invalidateAll(): Promise<void> {
    return this.#core.invalidateAll();
  }

  /** Closes host handles (unmount). */
  async close(): Promise<void> {
    await this.#core.handles.closeAll();
  }
}
