// Store-ahead: the read-ahead (read-ahead.ts) puts a small file it has read into the kernel's page cache
// of that file (FUSE_NOTIFY_STORE), so the walker that is about to read it finds the pages there and sends
// no READ. Each READ a cold `grep -r` sends costs a round trip, and its completion makes the kernel mark the
// file's atime stale (fuse_invalidate_atime), so the next stat of it costs another; a stored page does
// neither.
//
// What may be stored is exactly what a READ would return right then, to a sandbox that may read it and
// cannot change it, and only while nothing asks to see every read:
// - the rules give the path `read`, exactly: with `write` the sandbox could change the page between our
//   read of the codebase file and the store landing, and the store would then put the old bytes back over
//   its write (the kernel copies a store over an up-to-date page). `view` and `none` are never read ahead.
// - the node is one the kernel holds (it was handed out by a lookup or a listing), has a single name (a
//   hard link could carry other rules), and is served from the codebase layer: its version (ino, size,
//   mtime, ctime) was reported to the kernel with its attributes, and the store goes out only if that
//   version did not move and the invalidation generation (rules, discard, commit, writeFile) did not
//   change during our read, and if the whole file was read (exactly the size the kernel holds, under
//   STORE_BYTES). Anything that changes the file later invalidates the kernel's pages after the store: the
//   binding sends stores and invalidations from one thread, in order.
// - no allowed-access audit (`audit.allowed`): with it every READ must reach the worker to be recorded.
// The store itself runs on the binding's notifier thread, never on the JS thread: the kernel locks each
// page it fills, and a reader whose READ is waiting for the JS thread may hold that lock.
import type { FsCore } from './core.js';
import type { Inode } from './inodes.js';

/** Bytes read per file; only a file smaller than this (read whole by one pread) is stored. */
export const STORE_BYTES = 64 * 1024;

/** Puts `data` into the kernel's page cache of node `ino` from offset 0; resolves with an errno (0: done). */
export type PageStore = (ino: number, data: Uint8Array) => Promise<number>;

/** The store-ahead of one PolicyFs. */
export class StoreAhead {
  /** Set by the worker once mounted with the feature on; until then the read-ahead only warms the host. */
  store: PageStore | undefined;
  /** Read buffers, one per read-ahead in flight (ReadAhead bounds how many). */
  readonly #buffers: Buffer[] = [];

  /**
   * Reads `name` in `dir` and stores it, if it qualifies (see the file's head). Resolves false when it
   * does not qualify (the caller then only warms the host page cache), true once read and, if still
   * valid, stored. Never rejects.
   */
  async tryStore(fs: FsCore, dir: number, name: string, path: string): Promise<boolean> {
    const store = this.store;
    if (store === undefined || fs.audit.allowed) return false;
    const node = fs.inodes.child(dir, name);
    if (node === undefined || !this.#qualifies(fs, node, path)) return false;
    const version = fs.cache.lowerVersionOf(node.ino);
    const size = version === undefined ? -1 : reportedSize(version);
    if (size <= 0 || size >= STORE_BYTES) return false;
    const generation = fs.cache.generation;
    const buffer = this.#buffers.pop() ?? Buffer.allocUnsafeSlow(STORE_BYTES);
    let stored: Promise<number> | undefined;
    try {
      const bytesRead = await fs.delta.warm(path, buffer);
      if (
        bytesRead === size &&
        generation === fs.cache.generation &&
        fs.cache.lowerVersionOf(node.ino) === version &&
        fs.inodes.child(dir, name) === node &&
        this.#qualifies(fs, node, path)
      ) {
        // The binding copies the bytes before returning, so the buffer is free again right after.
        stored = store(node.ino, buffer.subarray(0, bytesRead));
      }
    } finally {
      this.#buffers.push(buffer);
    }
    if (stored !== undefined && (await stored.catch(() => -1)) === 0)
      fs.stats?.record('store-ahead', 0, false);
    return true;
  }

  #qualifies(fs: FsCore, node: Inode, path: string): boolean {
    return (
      node.nlookup > 0 && !node.isDir && node.links.length === 0 && fs.rules.permissionOf(path) === 'read'
    );
  }
}

/** The size field of a KernelCache version string (`ino:size:mtimeNs:ctimeNs`). */
function reportedSize(version: string): number {
  const size = Number(version.split(':')[1]);
  return Number.isSafeInteger(size) ? size : -1;
}
