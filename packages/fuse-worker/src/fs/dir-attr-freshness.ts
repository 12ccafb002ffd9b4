// Which directories' attributes the kernel holds fresh, as far as our replies and invalidations tell.
// fuse_permission (fs/fuse/dir.c) asks for a GETATTR in two cases only: before a check when the cached
// attributes are stale (timed out or invalidated), and after generic_permission() refused with fresh
// ones ("if permission is denied, try to refresh file attributes"). A path walk through a directory needs
// only its x bit, which every visible directory shows, so with fresh attributes a GETATTR of a directory
// is the kernel re-asking before it refuses a create or delete in it (dir-denials.ts). Directories only:
// a few entries, one Map write per attribute reply of a directory, nothing on file replies.

/** Expiry times of the attributes the kernel caches for directory nodes (node id -> ms, monotonic). */
export class DirAttrFreshness {
  readonly #until = new Map<number, number>();

  /** We replied with attributes of directory `ino` that the kernel may keep for `ttlSeconds`. */
  note(ino: number, ttlSeconds: number): void {
    // Stamped before the reply reaches the kernel, which starts its timeout later: our estimate ends
    // first, so a walk's GETATTR on timed-out attributes is never taken for a re-ask.
    if (ttlSeconds > 0) this.#until.set(ino, performance.now() + ttlSeconds * 1000);
    else this.#until.delete(ino);
  }

  /** The kernel was told to drop the node's attributes, or forgot the node. */
  drop(ino: number): void {
    this.#until.delete(ino);
  }

  isFresh(ino: number): boolean {
    const until = this.#until.get(ino);
    return until !== undefined && performance.now() < until;
  }
}
