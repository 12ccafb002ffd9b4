// Directories a HostDir walk found missing, remembered for a short time. The codebase layer is asked
// about every name the sandbox creates, and below a directory the sandbox made it has nothing: without
// this each such question walks the missing path through libuv's thread pool (a failed open per
// question, 0.1-1 ms under load) instead of answering at once. Bounded in age like the directory fd
// cache (a directory made behind our back is seen within `maxAgeMs`), in size, and by the HostDir's own
// namespace changes (any of them forgets everything).

/** Paths longer than this are neither remembered nor checked: the cache may always say "do not know". */
const MAX_PATH = 1024;
/** Bound on remembered paths; cleared, not evicted, when reached. */
const MAX_ENTRIES = 20_000;

export class AbsentDirs {
  readonly #maxAgeMs: number;
  /** path → time it was found missing (ms, performance.now()). */
  readonly #seen = new Map<string, number>();
  #generation = -1;

  constructor(maxAgeMs: number) {
    this.#maxAgeMs = maxAgeMs;
  }

  /** Remembers directory `rel` as missing, as observed while the namespace generation was `generation`. */
  remember(rel: string, generation: number): void {
    if (rel === '' || rel.length > MAX_PATH) return;
    this.#sync(generation);
    if (this.#seen.size >= MAX_ENTRIES) this.#seen.clear();
    this.#seen.set(rel, performance.now());
  }

  /** True when the parent directory of `rel`, or one of its ancestors, was recently found missing. */
  coversParentOf(rel: string, generation: number): boolean {
    const slash = rel.lastIndexOf('/');
    return slash > 0 && this.coversDir(rel.slice(0, slash), generation);
  }

  /** True when directory `rel` or one of its ancestors was recently found missing. */
  coversDir(rel: string, generation: number): boolean {
    this.#sync(generation);
    if (this.#seen.size === 0 || rel === '' || rel.length > MAX_PATH) return false;
    for (let end = rel.indexOf('/'); ; end = rel.indexOf('/', end + 1)) {
      const prefix = end < 0 ? rel : rel.slice(0, end);
      if (this.#fresh(prefix)) return true;
      if (end < 0) return false;
    }
  }

  #fresh(rel: string): boolean {
    const at = this.#seen.get(rel);
    if (at === undefined) return false;
    if (performance.now() - at <= this.#maxAgeMs) return true;
    this.#seen.delete(rel);
    return false;
  }

  /** A namespace change of our own (or an invalidation) may have made any of them: forget them all. */
  #sync(generation: number): void {
    if (generation === this.#generation) return;
    this.#seen.clear();
    this.#generation = generation;
  }
}
