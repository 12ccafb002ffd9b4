// What the worker remembers about the kernel's caches so it can take back what it let the kernel keep:
// the invalidation generation, the negative entries handed out with a TTL, and the codebase file versions
// last reported (kept in the nodes themselves, see Inode.lowerIno). PolicyFs calls invalidateAll() after rule changes, discards and writes that did not come
// through the mount; the README's "why the kernel's caches stay airtight" explains each piece.
import type { DeltaLookup } from '../delta/types.js';
import { DirAttrFreshness } from './dir-attr-freshness.js';
import { EntryFreshness } from './entry-freshness.js';
import type { HandleCache } from './handles.js';
import type { Inode, InodeTable } from './inodes.js';
import { ListingReplays } from './listing-replay.js';
import type { Invalidator } from './types.js';

/** Bound on remembered negative entries (see negativeTtl): a few MB at most. */
const MAX_NEGATIVES = 20_000;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A codebase file's version as last reported to the kernel (the node's lower* fields, see Inode). */
export interface LowerVersion {
  readonly ino: number | bigint;
  readonly size: number | bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
}

export interface KernelCacheOptions {
  readonly inodes: InodeTable;
  readonly handles: HandleCache;
}

/** The kernel-cache bookkeeping of one PolicyFs. */
export class KernelCache {
  readonly #inodes: InodeTable;
  readonly #handles: HandleCache;
  /** Bumped when an invalidation of the kernel's caches starts; lookups that straddle one are not cached. */
  generation = 0;
  /** Names answered with a cached negative entry since the last invalidateAll (parent node id + name). */
  readonly #negatives = new Map<string, { readonly parent: number; readonly name: string }>();
  /** Directories whose attributes the kernel holds fresh: a GETATTR of one is a re-ask (dir-denials.ts). */
  readonly dirAttrs = new DirAttrFreshness();
  /** Files' entries the kernel holds fresh: a listing may send them plain (entry-freshness.ts). */
  readonly entries = new EntryFreshness();
  #invalidator: Invalidator | undefined;
  /**
   * Whether a READ drops its directory's cached listing (see noteRead); on only when the mount has
   * READDIRPLUS, which is what makes the next listing refresh the attributes.
   */
  refreshListingsOnRead = false;
  /**
   * Directories with READs since their last listing: the node id of the one file READ so far, or 0 once a
   * second file was READ and the listing dropped (noteRead).
   */
  readonly #readInDirs = new Map<number, number>();
  /** READDIRPLUS answers the kernel may be handed again after such a drop (listing-replay.ts). */
  readonly replays = new ListingReplays();

  constructor(options: KernelCacheOptions) {
    this.#inodes = options.inodes;
    this.#handles = options.handles;
  }

  /**
   * The kernel keeps a negative entry for the TTL, and pruning its parent does not reliably drop it (a
   * directory's dentry is spliced back with its children), so invalidateAll names each one it may hold.
   * Past MAX_NEGATIVES remembered names, further negative answers are not cached at all.
   */
  negativeTtl(parent: number, name: string, ttl: number): number {
    if (ttl === 0) return 0;
    const key = `${parent}/${name}`;
    if (!this.#negatives.has(key)) {
      if (this.#negatives.size >= MAX_NEGATIVES) return 0;
      this.#negatives.set(key, { parent, name });
    }
    return ttl;
  }

  /** Set by the binding once mounted; every attribute invalidation also ends the node's freshness. */
  get invalidator(): Invalidator | undefined {
    return this.#invalidator;
  }

  set invalidator(invalidator: Invalidator | undefined) {
    const dirAttrs = this.dirAttrs;
    const entries = this.entries;
    const inodes = this.#inodes;
    this.#invalidator =
      invalidator === undefined
        ? undefined
        : {
            inode: (ino) => {
              dirAttrs.drop(ino);
              entries.drop(ino);
              // A directory's pages are its listing; a file's are its contents, which a store-ahead
              // prepared before now must not put back after this invalidation.
              if (inodes.get(ino)?.isDir !== true) invalidator.beforeContents?.();
              return invalidator.inode(ino);
            },
            entry: (parent, name) => {
              const child = inodes.child(parent, name);
              if (child !== undefined) entries.drop(child.ino);
              return invalidator.entry(parent, name);
            },
            beforeContents: () => invalidator.beforeContents?.(),
          };
  }

  /** The kernel forgot the node: so do we. */
  forgetNode(ino: number): void {
    this.dirAttrs.drop(ino);
    this.entries.drop(ino);
    this.#readInDirs.delete(ino);
    this.replays.drop(ino);
  }

  /**
   * A READ makes the kernel mark the file's atime stale (fuse_invalidate_atime), and so does listing a
   * directory afresh (readdir-plus.ts calls this for the directory): the next stat of it costs a GETATTR
   * round trip. A `grep -r` right after a cold one sent one per file read (10,141 in the bench). Dropping
   * the parent directory's cached listing instead makes its next listing a READDIRPLUS, which refreshes
   * every entry's attributes in one request (two with its end, both replayed when nothing changed). That
   * also drops the parent's attributes (its GETATTR at the walker's next path walk through it), so it is
   * done at the second entry of a listing that goes stale, not at the first: one stale entry costs its
   * one GETATTR. Only an invalidation: nothing is granted.
   */
  noteRead(node: Inode | undefined): void {
    if (!this.refreshListingsOnRead || node === undefined || node.parent === 0) return;
    const first = this.#readInDirs.get(node.parent);
    if (first === undefined) {
      // One file READ: its one GETATTR at the next stat costs less than refreshing the listing, which
      // also drops the directory's attributes (a GETATTR of the directory at the walker's next path walk
      // through it) and makes the next listing two READDIRPLUS.
      this.#readInDirs.set(node.parent, node.ino);
      return;
    }
    if (first === 0 || first === node.ino) return;
    this.#readInDirs.set(node.parent, 0);
    // attributes and pages of the directory: its pages are the kernel's readdir cache
    if (this.invalidator !== undefined) void this.invalidator.inode(node.parent);
  }

  /** Whether files of the directory were READ since its last listing (this listing refreshes them). */
  readSinceListed(dir: number): boolean {
    return this.#readInDirs.has(dir);
  }

  /** The directory was listed (READDIRPLUS from offset 0): a later READ in it drops the listing again. */
  listed(dir: number): void {
    this.#readInDirs.delete(dir);
  }

  /** The codebase version last reported to the kernel for a node, if any (a copy: see isLowerVersion). */
  lowerVersionOf(node: Inode): LowerVersion | undefined {
    if (node.lowerIno === undefined) return undefined;
    return {
      ino: node.lowerIno,
      size: node.lowerSize!,
      mtimeNs: node.lowerMtimeNs!,
      ctimeNs: node.lowerCtimeNs!,
    };
  }

  /** Whether `version` is still the one last reported for the node. */
  isLowerVersion(node: Inode, version: LowerVersion): boolean {
    return (
      node.lowerIno === version.ino &&
      node.lowerSize === version.size &&
      node.lowerMtimeNs === version.mtimeNs &&
      node.lowerCtimeNs === version.ctimeNs
    );
  }

  /**
   * The identity and version (ino, size, mtime, ctime) of a node served from the codebase, about to be
   * reported to the kernel, against the one reported before (kept in the node: Inode.lowerIno...). When
   * it moves, the codebase file was replaced or changed behind this sandbox (another sandbox's commit, an
   * editor on the host): the host handle (which would keep reading the old inode) and the kernel's pages
   * must go. Seen at the next getattr/lookup, i.e. within the attribute timeout.
   */
  checkLowerVersion(node: Inode, found: DeltaLookup): void {
    const st = found.stat;
    const ino = exact(st.ino);
    const size = exact(st.size);
    const mtimeNs = st.mtimeNs;
    const ctimeNs = st.ctimeNs;
    const previous = node.lowerIno;
    if (
      previous === ino &&
      node.lowerSize === size &&
      node.lowerMtimeNs === mtimeNs &&
      node.lowerCtimeNs === ctimeNs
    ) {
      return;
    }
    node.lowerIno = ino;
    node.lowerSize = size;
    node.lowerMtimeNs = mtimeNs;
    node.lowerCtimeNs = ctimeNs;
    if (previous === undefined) return;
    this.#handles.drop(node.ino);
    // A remembered listing would hand the kernel the old attributes again.
    this.replays.clear();
    // Fire and forget: the notification never blocks this reply (see Invalidator).
    if (this.invalidator !== undefined) void this.invalidator.inode(node.ino);
  }

  /**
   * After a move, the kernel must re-ask for attributes of the node and, unless the rules give everything
   * below the same permission at both places (`below: false`), of everything below it.
   */
  invalidateTree(node: Inode, options: { readonly below: boolean } = { below: true }): void {
    this.replays.clear();
    const invalidator = this.invalidator;
    if (invalidator === undefined) return;
    const nodes = [node, ...(node.isDir && options.below ? this.#inodes.descendants(node.ino) : [])];
    for (const n of nodes) void invalidator.inode(n.ino);
  }

  /**
   * Tells the kernel to forget every node it holds, each of its names, and every negative entry handed
   * out. Resolves when the kernel has processed them. The caller bumped `generation` first.
   */
  async notifyAll(): Promise<void> {
    this.replays.clear();
    const invalidator = this.invalidator;
    if (invalidator === undefined) return;
    const pending: Promise<void>[] = [];
    for (const node of this.#inodes.entries()) {
      pending.push(invalidator.inode(node.ino));
      if (node.parent !== 0) pending.push(invalidator.entry(node.parent, node.name));
      for (const link of node.links ?? []) pending.push(invalidator.entry(link.parent, link.name));
    }
    // Names that did not exist may exist now (discard, commit, writeFile): drop the negative entries too.
    for (const { parent, name } of this.#negatives.values()) pending.push(invalidator.entry(parent, name));
    this.#negatives.clear();
    await Promise.all(pending);
  }
}

/** A number when it is one exactly, so the common value holds no bigint (compared with ===: never mixed). */
function exact(value: bigint): number | bigint {
  return value <= MAX_SAFE && value >= -MAX_SAFE ? Number(value) : value;
}
