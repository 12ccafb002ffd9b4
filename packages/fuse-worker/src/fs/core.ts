// The state one PolicyFs shares between its op files (lookup-ops, attr-ops, namespace-ops, dir-listing,
// data-ops, whole-file) and the small helpers they all use: node/path resolution and the attributes an
// entry is reported with. The permission decisions themselves live in decisions.ts.
import type { Permission, RuleSet } from '@agentfense/protocol';
import type { AuditLog } from '../audit.js';
import type { Delta } from '../delta/delta.js';
import type { DeltaLookup } from '../delta/types.js';
import { FsError } from '../errors.js';
import { stableIno, toAttr } from './attrs.js';
import type { FuseAttr } from './attrs.js';
import { HandleCache } from './handles.js';
import { InodeTable } from './inodes.js';
import type { Inode } from './inodes.js';
import type { EntryWarmup } from './entry-warmup.js';
import { KernelCache } from './kernel-cache.js';
import type { NativeReads } from './native-reads.js';
import type { NativeCreates } from './native-creates.js';
import type { NativeLookups } from './native-lookups.js';
import type { NativeWrites } from './native-writes.js';
import type { OpStats } from './op-stats.js';
import type { Owner } from './ownership.js';
import { ReadAhead } from './read-ahead.js';
import { ListingPredictor, ReadPredictor } from './read-predictor.js';
import { StoreAhead } from './store-ahead.js';
import { SubdirCounts } from './subdir-counts.js';
import type { Listing } from './listing.js';
import type { EntryReply, PolicyFsOptions } from './types.js';
import { WriteHints } from './write-hints.js';

/** The shared state of one PolicyFs (internal to fs/: PolicyFs is the public face). */
export class FsCore {
  readonly inodes = new InodeTable();
  readonly handles = new HandleCache();
  readonly delta: Delta;
  readonly audit: AuditLog;
  readonly ttl: number;
  readonly uid: number;
  readonly gid: number;
  readonly statfsPath: string;
  readonly stats: OpStats | undefined;
  /** Where the worker mounted this filesystem (host path; dir-denials.ts finds the mount by it). */
  mountpoint: string | undefined;
  rules: RuleSet;
  hints: WriteHints;
  /** Merged, filtered listings by directory node, so offset > 0 continues the same snapshot (listing.ts). */
  readonly listings = new Map<number, Listing>();
  /** Link counts of directories that took a listing to count (subdir-counts.ts). */
  readonly subdirCounts = new SubdirCounts();
  readonly cache = new KernelCache({ inodes: this.inodes, handles: this.handles });
  readonly predictor = new ReadPredictor();
  /** Whether walkers read what they list: the read-ahead then starts at the listing (read-ahead.ts). */
  readonly listingPredictor = new ListingPredictor();
  /**
   * With READDIRPLUS a walker's LOOKUPs never reach us (the listing carried them), so the read-ahead
   * follows the walker's first READ of each file instead (data-ops.ts). A stat-only walk reads nothing
   * and so still warms nothing.
   */
  readAheadOnRead = false;
  /** The read-ahead's reads, stored into the kernel's page cache where that is safe (store-ahead.ts). */
  readonly storeAhead = new StoreAhead();
  /**
   * Files created write-only get FOPEN_DIRECT_IO (namespace-ops.ts create); the kernel then leaves set-id
   * bits to us on their writes, so those nodes are remembered until forgotten (data-ops.ts write).
   */
  directWrites = false;
  readonly directWriters = new Set<number>();
  /** WRITEs answered by the binding on earlier decisions (native-writes.ts); set once mounted, if on. */
  nativeWrites: NativeWrites | undefined;
  /** READs answered by the binding on earlier decisions (native-reads.ts); set once mounted, if on. */
  nativeReads: NativeReads | undefined;
  /** LOOKUP misses answered by the binding in marked directories (native-lookups.ts); set once mounted. */
  nativeLookups: NativeLookups | undefined;
  /** CREATEs answered by the binding in those directories (native-creates.ts); set once mounted, if on. */
  nativeCreates: NativeCreates | undefined;
  /** Lists the tree into the kernel's dcache after the first access (entry-warmup.ts); set once mounted. */
  warmup: EntryWarmup | undefined;
  readonly readAhead = new ReadAhead({
    listing: (dir) => this.listings.get(dir),
    warm: (dir, names, store) => this.#warm(dir, names, store),
  });

  constructor(options: PolicyFsOptions) {
    this.delta = options.delta;
    this.rules = options.rules;
    this.hints = new WriteHints(options.rules);
    this.audit = options.audit;
    this.ttl = options.cacheTtlSeconds;
    this.uid = options.uid;
    this.gid = options.gid;
    this.statfsPath = options.statfsPath;
    this.stats = options.stats;
  }

  setRules(rules: RuleSet): void {
    this.nativeWrites?.invalidate();
    this.nativeReads?.invalidate();
    this.nativeLookups?.revoke();
    this.nativeCreates?.refresh();
    this.rules = rules;
    this.hints = new WriteHints(rules);
    this.subdirCounts.clear();
  }

  /**
   * ReadAhead's warm-up of listed files: only content the sandbox may read now, stored into the kernel's
   * page cache where store-ahead.ts allows it (and `store` asks for it), else into the host's only.
   * Resolves with the files not stored because the kernel did not hold their nodes yet.
   */
  async #warm(dir: number, names: string[], store: boolean): Promise<string[]> {
    const dirPath = this.inodes.pathOf(dir);
    if (dirPath === null) return [];
    const started = performance.now();
    const { stored, noNode } = await this.storeAhead.readAhead(this, dir, dirPath, names, store);
    const stats = this.stats;
    if (stats !== undefined) {
      for (let i = 0; i < stored; i++) stats.record('store-ahead', 0, false);
      const micros = (performance.now() - started) * 1000;
      for (let i = 0; i < names.length; i++) stats.record('readahead', micros, false);
    }
    return noNode;
  }

  /**
   * Makes the kernel forget every cached attribute, page, dentry and listing (after rule changes, a
   * discard, or a write that did not come through the mount). Resolves when the kernel has them.
   */
  async invalidateAll(): Promise<void> {
    // a write behind the mount may have changed a file the binding answers WRITEs on (its size)
    this.nativeWrites?.invalidate();
    this.nativeReads?.invalidate();
    this.nativeLookups?.revoke();
    this.nativeCreates?.refresh();
    this.cache.generation++;
    this.cache.entries.clear();
    // The walk ends before the kernel is told: a listing of the walker's answered from now on carries no
    // timeouts (readdir-plus.ts), and the kernel will hold none of the warmed entries; the next access
    // lists the tree again.
    this.warmup?.invalidated();
    this.cache.invalidator?.beforeContents?.();
    this.listings.clear();
    this.subdirCounts.clear();
    this.readAhead.clear();
    this.handles.closeUnpinned();
    await this.cache.notifyAll();
  }

  node(ino: number): Inode {
    const node = this.inodes.get(ino);
    if (node === undefined) throw new FsError('ESTALE', `inode ${ino} is not known`);
    return node;
  }

  pathOrStale(ino: number): string {
    const path = this.inodes.pathOf(ino);
    if (path === null) throw new FsError('ENOENT', `inode ${ino} was removed`);
    return path;
  }

  childPath(parent: number, name: string): string {
    const path = this.inodes.childPath(parent, name);
    if (path === null) throw new FsError('ENOENT', `directory inode ${parent} was removed`);
    return path;
  }

  async mustFind(path: string): Promise<DeltaLookup> {
    const found = await this.delta.lookup(path);
    if (found === null) throw new FsError('ENOENT', `${path} no longer exists`);
    return found;
  }

  /** The owner shown for an entry: stored on upper entries, the sandbox owner for codebase ones. */
  ownerOf(found: DeltaLookup): Owner {
    if (found.layer === 'lower') return { uid: this.uid, gid: this.gid };
    return { uid: Number(found.stat.uid), gid: Number(found.stat.gid) };
  }

  entry(node: Inode, path: string, found: DeltaLookup, permission: Permission, ttl = this.ttl): EntryReply {
    if (node.isDir) this.cache.dirAttrs.note(node.ino, ttl);
    else this.cache.entries.entrySent(node.ino, ttl, this.cache.generation);
    return {
      ino: node.ino,
      attr: this.attr(node, path, found, permission),
      entryTimeout: ttl,
      attrTimeout: ttl,
    };
  }

  attr(node: Inode, path: string, found: DeltaLookup, permission: Permission): FuseAttr {
    if (node.stIno === 0) node.stIno = stableIno(found.lower, found.upper, node.ino);
    if (found.layer === 'lower' && found.type === 'file') this.cache.checkLowerVersion(node, found);
    let effective = permission;
    if (found.type === 'directory') {
      // A directory shown only for the exceptions inside it can be listed; one that may receive writes
      // needs its w bit so the kernel forwards creates to us (write-hints.ts).
      if (effective === 'none') effective = 'view';
      if (effective !== 'write' && this.hints.mayWriteInside(path)) effective = 'write';
    }
    const owner = this.ownerOf(found);
    return toAttr(found.stat, { ino: node.stIno, permission: effective, uid: owner.uid, gid: owner.gid });
  }

  /**
   * A directory's link count from what the sandbox may see: 2 + its visible subdirectories (the host's
   * count would reveal hidden and whited-out ones through `stat -c %h`). Costs a merged listing, once per
   * attribute timeout.
   */
  async links(dir: number, path: string, found: DeltaLookup): Promise<number> {
    const known = this.linksIfKnown(dir, path, found);
    if (known !== undefined) return known;
    const since = this.subdirCounts.begin();
    const generation = this.cache.generation;
    let subdirs = 0;
    for (const entry of await this.delta.readdir(path)) {
      if (entry.type !== 'directory') continue;
      if (this.countsAsSubdir(path === '/' ? `/${entry.name}` : `${path}/${entry.name}`)) subdirs++;
    }
    // Listed across an invalidation (rules, discard, commit): correct for this answer, not to keep.
    if (generation === this.cache.generation) this.subdirCounts.keep(dir, subdirs, this.ttl, since);
    return 2 + subdirs;
  }

  /** links() when it needs no listing; undefined otherwise. */
  linksIfKnown(dir: number, path: string, found: DeltaLookup): number | undefined {
    // A leaf directory of the codebase (most of them) needs no listing: nothing below it to hide or add.
    if (this.delta.knownNoSubdirs(path, found)) return 2;
    const known = this.subdirCounts.get(dir);
    return known === undefined ? undefined : 2 + known;
  }

  /** Whether a subdirectory at `path` counts in its parent's link count: hidden ones do not. */
  countsAsSubdir(path: string): boolean {
    return this.rules.permissionOf(path) !== 'none' || this.rules.isTraversable(path);
  }

  /** Drops a directory's cached listing (its entries changed), and ReadAhead's position in it. */
  forgetListing(dir: number): void {
    this.listings.delete(dir);
    this.cache.replays.drop(dir);
    this.readAhead.forget(dir);
  }

  forgetHandleUnlessWritable(ino: number): void {
    if (this.handles.get(ino, true) === undefined) this.handles.drop(ino);
  }
}
