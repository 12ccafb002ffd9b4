// Which non-directory entries the kernel holds fresh, as far as our replies and invalidations tell: a
// READDIRPLUS can then send such a name as a plain entry (node id 0, which the kernel reads as "no entry
// given" and leaves its own dentry and attributes as they are) instead of a full LOOKUP answer, which the
// kernel would take as one more lookup of the node and the worker would build (rules, host lstat, attrs)
// for each file of a `find` over a tree it has just written.
//
// Only an estimate of what the kernel holds, and never a grant: a plain entry gives the kernel nothing, so
// a wrong "fresh" costs at most a LOOKUP or GETATTR later, when the kernel's own timeouts run out. What
// the sandbox may see is decided as before: the listing has only visible names, and every LOOKUP and
// GETATTR the kernel sends is decided by the rules in force. An invalidation of the kernel's caches (rule
// change, discard, commit, writeFile) moves the cache generation, which ends every freshness noted before.

/** Below this much time left, a name is not fresh: the kernel would ask again soon after the listing. */
const MARGIN_MS = 1000;
/** Bound on noted nodes (~100 bytes each): past it, new ones are not noted (sent in full, as without this). */
const MAX_NODES = 65_536;

interface Fresh {
  /** Until when the kernel holds the dentry (ms, monotonic, stamped before the reply). */
  readonly entryUntil: number;
  /** Until when it holds the attributes; 0 once something made them stale in the kernel. */
  attrUntil: number;
  /** The cache generation the entry was sent in. */
  readonly generation: number;
}

/** Entries and attributes of non-directory nodes the kernel holds fresh (node id -> times). */
export class EntryFreshness {
  readonly #byIno = new Map<number, Fresh>();
  /** Set at mount (the freshEntries feature, with READDIRPLUS); off, no name is ever fresh. */
  enabled = false;

  /** We replied with a full entry (LOOKUP, CREATE, MKNOD, SYMLINK, READDIRPLUS) for a non-directory. */
  entrySent(ino: number, ttlSeconds: number, generation: number): void {
    if (!this.enabled) return;
    if (!(ttlSeconds > 0)) {
      this.#byIno.delete(ino);
      return;
    }
    if (this.#byIno.size >= MAX_NODES && !this.#byIno.has(ino)) return;
    const until = performance.now() + ttlSeconds * 1000;
    this.#byIno.set(ino, { entryUntil: until, attrUntil: until, generation });
  }

  /** We replied with the node's attributes (GETATTR, SETATTR): fresh again, for at most the entry's time. */
  attrsSent(ino: number, ttlSeconds: number): void {
    const fresh = this.#byIno.get(ino);
    if (fresh === undefined) return;
    fresh.attrUntil = ttlSeconds > 0 ? performance.now() + ttlSeconds * 1000 : 0;
  }

  /**
   * The kernel marked the node's attributes stale itself: a READ (atime), a WRITE or FALLOCATE (size and
   * mtime), a LINK, UNLINK or RENAME (nlink, ctime). Its next listing refreshes them with a full entry.
   */
  attrsStale(ino: number): void {
    const fresh = this.#byIno.get(ino);
    if (fresh !== undefined) fresh.attrUntil = 0;
  }

  /** The kernel forgot the node or was told to drop its attributes or a name of it. */
  drop(ino: number): void {
    this.#byIno.delete(ino);
  }

  /** Whether the kernel holds the node's entry and attributes fresh for a while yet, in `generation`. */
  isFresh(ino: number, generation: number): boolean {
    const fresh = this.#byIno.get(ino);
    if (fresh === undefined) return false;
    if (fresh.generation !== generation) {
      this.#byIno.delete(ino);
      return false;
    }
    const now = performance.now() + MARGIN_MS;
    return now < fresh.entryUntil && now < fresh.attrUntil;
  }

  /** Everything ends (an invalidation of the kernel's caches). */
  clear(): void {
    this.#byIno.clear();
  }

  get size(): number {
    return this.#byIno.size;
  }
}
