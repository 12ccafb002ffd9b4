// What the worker remembers about the kernel's caches so it can take back what it let the kernel keep:
// the invalidation generation, the negative entries handed out with a TTL, and the codebase file versions
// last reported. PolicyFs calls invalidateAll() after rule changes, discards and writes that did not come
// through the mount; the README's "why the kernel's caches stay airtight" explains each piece.
import type { DeltaLookup } from '../delta/types.js';
import type { HandleCache } from './handles.js';
import type { Inode, InodeTable } from './inodes.js';
import type { Invalidator } from './types.js';

/** Bound on remembered negative entries (see negativeTtl): a few MB at most. */
const MAX_NEGATIVES = 20_000;

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
  /**
   * The identity and version (ino, size, mtime, ctime) last reported for nodes served from the codebase.
   * When it moves, the codebase file was replaced or changed behind this sandbox (another sandbox's
   * commit, an editor on the host): the host handle (which would keep reading the old inode) and the
   * kernel's pages must go. Seen at the next getattr/lookup, i.e. within the attribute timeout.
   */
  readonly #lowerVersions = new Map<number, string>();
  invalidator: Invalidator | undefined;

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

  /** The kernel forgot the node: so do we. */
  forgetNode(ino: number): void {
    this.#lowerVersions.delete(ino);
  }

  checkLowerVersion(node: Inode, found: DeltaLookup): void {
    const st = found.stat;
    const version = `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    const previous = this.#lowerVersions.get(node.ino);
    this.#lowerVersions.set(node.ino, version);
    if (previous === undefined || previous === version) return;
    this.#handles.drop(node.ino);
    // Fire and forget: the notification never blocks this reply (see Invalidator).
    if (this.invalidator !== undefined) void this.invalidator.inode(node.ino);
  }

  /** After a move, the kernel must re-ask for attributes of the node and everything below it. */
  invalidateTree(node: Inode): void {
    const invalidator = this.invalidator;
    if (invalidator === undefined) return;
    const nodes = [node, ...(node.isDir ? this.#inodes.descendants(node.ino) : [])];
    for (const n of nodes) void invalidator.inode(n.ino);
  }

  /**
   * Tells the kernel to forget every node it holds, each of its names, and every negative entry handed
   * out. Resolves when the kernel has processed them. The caller bumped `generation` first.
   */
  async notifyAll(): Promise<void> {
    const invalidator = this.invalidator;
    if (invalidator === undefined) return;
    const pending: Promise<void>[] = [];
    for (const node of this.#inodes.entries()) {
      pending.push(invalidator.inode(node.ino));
      if (node.parent !== 0) pending.push(invalidator.entry(node.parent, node.name));
      for (const link of node.links) pending.push(invalidator.entry(link.parent, link.name));
    }
    // Names that did not exist may exist now (discard, commit, writeFile): drop the negative entries too.
    for (const { parent, name } of this.#negatives.values()) pending.push(invalidator.entry(parent, name));
    this.#negatives.clear();
    await Promise.all(pending);
  }
}
