// A bounded memo for per-path answers.
//
// Two generations of Maps: new entries go into `young`; when it is full it becomes `old` and the previous
// old generation is dropped wholesale. A hit in `old` is promoted, so the working set survives rotations (an
// approximate LRU). Why not evict the oldest key of one Map: V8 leaves a tombstone per delete and
// `keys().next()` walks them all, which made every insert O(capacity) once full (50 µs per decision).
//
// Scan resistance: retaining a key is the expensive part of a miss (the string and the Map's table survive
// young-generation GCs and get promoted), and a scan (`find`, `grep -r`) never hits again anyway. So while
// the recent hit rate is low, only every Nth miss is admitted. A path that keeps being asked for is still
// admitted after a few misses, and a working set is not flushed by one large scan.

/** Lookups per measurement window of the hit rate. */
const WINDOW = 4096;

/** Options for BoundedCache. */
export interface BoundedCacheOptions {
  /** Maximum number of entries (0 disables caching). */
  readonly capacity: number;
}

/** A string-keyed cache holding at most `capacity` entries. */
export class BoundedCache<V> {
  #young = new Map<string, V>();
  #old = new Map<string, V>();
  readonly #generation: number;
  #lookups = 0;
  #hits = 0;
  #misses = 0;
  /** Admit one miss in this many (1 = all); adapted to the hit rate of the previous window. */
  #admitEvery = 1;

  constructor(options: BoundedCacheOptions) {
    this.#generation = Math.max(0, Math.floor(options.capacity / 2));
  }

  /** The cached value, or undefined. */
  get(key: string): V | undefined {
    if (++this.#lookups === WINDOW) this.#adapt();
    const young = this.#young.get(key);
    if (young !== undefined) {
      this.#hits++;
      return young;
    }
    const old = this.#old.get(key);
    if (old !== undefined) {
      this.#hits++;
      this.#insert(key, old);
    }
    return old;
  }

  /** Offers a value computed after a miss; it is kept unless a scan is in progress (see above). */
  set(key: string, value: V): void {
    if (this.#admitEvery > 1 && ++this.#misses % this.#admitEvery !== 0) return;
    this.#insert(key, value);
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

  #insert(key: string, value: V): void {
    if (this.#generation === 0) return;
    if (this.#young.size >= this.#generation) {
      this.#old = this.#young;
      this.#young = new Map();
    }
    this.#young.set(key, value);
  }

  #adapt(): void {
    const rate = this.#hits / this.#lookups;
    this.#admitEvery = rate < 0.02 ? 16 : rate < 0.2 ? 4 : 1;
    this.#lookups = 0;
    this.#hits = 0;
  }
}
