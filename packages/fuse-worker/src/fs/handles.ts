// Open host files per node. OPEN is answered with ENOSYS (the kernel then never sends OPEN/RELEASE and
// keeps page caches), so reads and writes arrive without a handle of ours: we keep one per node, opened
// on first use, closed on FORGET or when the LRU bound evicts it.
import { readFileSync } from 'node:fs';

import type { HostFile, WritableFile } from '../host/raw-file.js';

/**
 * Upper bound on host fds held for data ops. Large enough that a walk over a tree the sandbox just wrote
 * (grep -r after tar -xf: ~740 files, npm's trees more) finds every file's fd still open, so its READs
 * stay in the binding (native-reads.ts): an LRU smaller than the walk evicts each file just before it is
 * read again. What one costs: a `struct file` (~256 bytes of kernel slab, charged to the worker's memory
 * cgroup like the inode and dentry it keeps cached) and ~200 bytes of JS, under 4 MiB for all of them
 * against the worker's 256 MiB base bound (worker-cgroup.ts).
 */
export const MAX_OPEN_HANDLES = 4096;
/** The bound with the wideHandles switch off (mount-options.ts), for comparison in the bench. */
export const NARROW_HANDLES = 512;
/** Below this many handles the cache would thrash on an ordinary directory. */
const MIN_OPEN_HANDLES = 64;

/**
 * The bound for a process whose soft RLIMIT_NOFILE is `softLimit`: at most a quarter of it, so the
 * handles never starve the worker's other fds (directory fds, the lookup fast path's marks, the journal).
 */
export function handleBound(softLimit: number | undefined): number {
  if (softLimit === undefined || !Number.isFinite(softLimit)) return MAX_OPEN_HANDLES;
  return Math.max(MIN_OPEN_HANDLES, Math.min(MAX_OPEN_HANDLES, Math.floor(softLimit / 4)));
}

/** This process's soft RLIMIT_NOFILE from /proc/self/limits; undefined when unlimited or unreadable. */
export function softNofile(limits: string = readLimits()): number | undefined {
  const line = limits.split('\n').find((l) => l.startsWith('Max open files'));
  const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
  return soft === undefined || !/^[0-9]+$/.test(soft) ? undefined : Number(soft);
}

function readLimits(): string {
  try {
    return readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return '';
  }
}

/** Writable handles can chown/chmod (the setattr path of unlinked files needs them). */
type Entry =
  | { readonly handle: WritableFile; readonly writable: true }
  | { readonly handle: HostFile; readonly writable: false };

/** LRU of host file handles keyed by node id. */
export class HandleCache {
  #bound: number;
  readonly #entries = new Map<number, Entry>();
  readonly #pinned = new Set<number>();
  /** Told before a node's handle closes, while its fd still names the file (fs/native-writes.ts). */
  beforeClose: ((ino: number, fd: number) => void) | undefined;

  constructor(bound: number = handleBound(softNofile())) {
    this.#bound = bound;
  }

  /** How many unpinned handles stay open (the least recently used beyond it is closed). */
  get bound(): number {
    return this.#bound;
  }

  /** Lowers the bound (wideHandles off; before any handle is opened: nothing is evicted here). */
  narrow(bound: number = NARROW_HANDLES): void {
    this.#bound = Math.min(this.#bound, bound);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** A cached handle usable for the access asked for, or undefined. */
  get(ino: number, needWrite: true): WritableFile | undefined;
  get(ino: number, needWrite: boolean): HostFile | undefined;
  get(ino: number, needWrite: boolean): HostFile | undefined {
    const entry = this.#entries.get(ino);
    if (entry === undefined || (needWrite && !entry.writable)) return undefined;
    // Refresh LRU position (Map keeps insertion order).
    this.#entries.delete(ino);
    this.#entries.set(ino, entry);
    return entry.handle;
  }

  /** Stores a handle for a node, closing the one it replaces and evicting the least recently used. */
  set(ino: number, handle: WritableFile, writable: true): void;
  set(ino: number, handle: HostFile, writable: false): void;
  set(ino: number, handle: HostFile, writable: boolean): void {
    this.drop(ino);
    // The overloads guarantee that a writable entry holds a WritableFile.
    this.#entries.set(ino, { handle, writable } as Entry);
    for (const [victim] of this.#entries) {
      if (this.#entries.size <= this.#bound) break;
      if (this.#pinned.has(victim)) continue;
      this.drop(victim);
    }
  }

  /**
   * Keeps a node's handle until it is forgotten: an unlinked file that the sandbox still has open (no path
   * left) can only be served through it.
   */
  pin(ino: number): void {
    this.#pinned.add(ino);
  }

  /** Closes a node's handle (after copy-up changed which host file backs it, or on forget). */
  drop(ino: number): void {
    const entry = this.#entries.get(ino);
    this.#pinned.delete(ino);
    if (entry === undefined) return;
    this.#entries.delete(ino);
    this.#closing(ino, entry.handle);
    // Closing can only fail for a bad fd, which would be our bug; there is no caller to tell.
    entry.handle.close().catch(() => undefined);
  }

  /**
   * Closes every handle that a path can reopen (after a discard or commit replaced the host files behind
   * them); pinned handles of unlinked-but-open files stay, nothing else can serve them.
   */
  closeUnpinned(): void {
    for (const ino of [...this.#entries.keys()]) {
      if (!this.#pinned.has(ino)) this.drop(ino);
    }
  }

  #closing(ino: number, handle: HostFile): void {
    if (this.beforeClose !== undefined && handle.fd !== -1) this.beforeClose(ino, handle.fd);
  }

  /** Closes everything (unmount). */
  async closeAll(): Promise<void> {
    const all = [...this.#entries.values()];
    for (const [ino, entry] of this.#entries) this.#closing(ino, entry.handle);
    this.#entries.clear();
    this.#pinned.clear();
    await Promise.allSettled(all.map((e) => e.handle.close()));
  }
}
