// Open host files per node. OPEN is answered with ENOSYS (the kernel then never sends OPEN/RELEASE and
// keeps page caches), so reads and writes arrive without a handle of ours: we keep one per node, opened
// on first use, closed on FORGET or when the LRU bound evicts it.
import type { HostFile, WritableFile } from '../host/raw-file.js';

/** Upper bound on host fds held for data ops (each is one fd of the worker). */
export const MAX_OPEN_HANDLES = 512;

/** Writable handles can chown/chmod (the setattr path of unlinked files needs them). */
type Entry =
  | { readonly handle: WritableFile; readonly writable: true }
  | { readonly handle: HostFile; readonly writable: false };

/** LRU of host file handles keyed by node id. */
export class HandleCache {
  readonly #entries = new Map<number, Entry>();
  readonly #pinned = new Set<number>();
  /** Told before a node's handle closes, while its fd still names the file (fs/native-writes.ts). */
  beforeClose: ((ino: number, fd: number) => void) | undefined;

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
      if (this.#entries.size <= MAX_OPEN_HANDLES) break;
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
