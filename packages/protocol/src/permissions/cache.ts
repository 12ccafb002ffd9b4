// A bounded memo for per-path answers, kept as two generations of Maps: new entries go into `young`; when
// it is full it becomes `old` and the previous old generation is dropped wholesale. A hit in `old` is
// promoted, so the working set survives rotations (an approximate LRU). Why not evict the oldest key of
// one Map: V8 leaves a tombstone per delete and `keys().next()` walks them all, which made every insert
// O(capacity) once full (measured: 50 µs per decision instead of 1 µs).

/** A string-keyed cache holding at most `capacity` entries (0 disables caching). */
export class BoundedCache<V> {
  #young = new Map<string, V>();
  #old = new Map<string, V>();
  readonly #generation: number;

  constructor(capacity: number) {
    this.#generation = Math.max(0, Math.floor(capacity / 2));
  }

  /** The cached value, or undefined. */
  get(key: string): V | undefined {
    const young = this.#young.get(key);
    if (young !== undefined) return young;
    const old = this.#old.get(key);
    if (old !== undefined) this.set(key, old);
    return old;
  }

  /** Stores a value, rotating generations when the young one is full. */
  set(key: string, value: V): void {
    if (this.#generation === 0) return;
    if (this.#young.size >= this.#generation) {
      this.#old = this.#young;
      this.#young = new Map();
    }
    this.#young.set(key, value);
  }

  /** Drops every entry. */
  clear(): void {
    this.#young = new Map();
    this.#old = new Map();
  }

  /** Number of entries held (a key promoted from the old generation may be counted twice). */
  get size(): number {
    return this.#young.size + this.#old.size;
  }
}
