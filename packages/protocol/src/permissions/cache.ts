// A bounded memo for per-path answers: one Map, emptied when full.
//
// Why not evict the oldest key: V8 leaves a tombstone per Map delete and `keys().next()` walks them all,
// which made every insert O(capacity) once full (measured: 50 µs per decision). Why not two generations with
// promotion: a miss then costs two lookups in large tables, and a miss is the expensive case already.
// Emptying a full cache costs one refill of the working set, which with the admission rule below happens
// at most once per `capacity` admitted misses.
//
// Scan resistance: retaining a key is the expensive part of a miss (the string and the Map's table survive
// young-generation GCs and get promoted), and a scan (`find`, `grep -r`) never hits again anyway. So while
// the recent hit rate is low, only every Nth miss is admitted. A path that keeps being asked for is still
// admitted after a few misses, and a working set is not flushed by one large scan.

// Membership filter: a miss in a large Map costs a few cache-missing memory reads (~200 ns measured, more
// on a busy machine), which dominated uncached decisions. A one-hash Bloom filter over a cheap sample of
// the key (its length and last 24 characters, where sibling paths differ) answers most misses from 128 KiB.
// A false positive only costs the Map lookup it would have cost anyway.

/** Filter size in bits (a power of two): ~10% false positives at 100k entries. */
const FILTER_BITS = 1 << 20;

function sampleHash(key: string): number {
  let h = Math.imul(key.length, 0x9e3779b1);
  for (let i = Math.max(0, key.length - 24); i < key.length; i++)
    h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h ^ (h >>> 15)) & (FILTER_BITS - 1);
}

/** Lookups per measurement window of the hit rate. */
const WINDOW = 4096;

/**
 * Keys are paths, whose length has no bound of its own: a chain of 1,200 nested directories of 255-character
 * names makes 1,200 paths of up to 300 KB, ~184 MB held by a memo counted in entries only. So the keys'
 * characters count too: past this many the cache empties like a full one (~16 MiB of one-byte keys: a
 * 100,000-path working set of 60-character paths holds a third of it).
 */
const DEFAULT_MAX_KEY_CHARS = 16 * 1024 * 1024;
/**
 * A key longer than this is never kept: the kernel's PATH_MAX, past which no syscall names a path anyway
 * (such a path is reached by relative steps, each of which asks about its own path).
 */
const MAX_KEY_LENGTH = 4096;

/** Options for BoundedCache. */
export interface BoundedCacheOptions {
  /** Maximum number of entries (0 disables caching). */
  readonly capacity: number;
  /** Maximum number of key characters held (default 16 Mi). */
  readonly maxKeyChars?: number;
}

/** A string-keyed cache holding at most `capacity` entries and `maxKeyChars` characters of keys. */
export class BoundedCache<V> {
  #map = new Map<string, V>();
  #keyChars = 0;
  readonly #maxKeyChars: number;
  readonly #filter = new Uint32Array(FILTER_BITS / 32);
  readonly #capacity: number;
  #lookups = 0;
  #hits = 0;
  #misses = 0;
  /** Admit one miss in this many (1 = all); adapted to the hit rate of the previous window. */
  #admitEvery = 1;

  constructor(options: BoundedCacheOptions) {
    this.#capacity = Math.max(0, Math.floor(options.capacity));
    this.#maxKeyChars = options.maxKeyChars ?? DEFAULT_MAX_KEY_CHARS;
  }

  /** The cached value, or undefined. */
  get(key: string): V | undefined {
    if (++this.#lookups === WINDOW) this.#adapt();
    const bit = sampleHash(key);
    if ((this.#filter[bit >>> 5]! & (1 << (bit & 31))) === 0) return undefined;
    const value = this.#map.get(key);
    if (value !== undefined) this.#hits++;
    return value;
  }

  /** Offers a value computed after a miss; it is kept unless a scan is in progress (see above). */
  set(key: string, value: V): void {
    if (this.#capacity === 0 || key.length > MAX_KEY_LENGTH) return;
    if (this.#admitEvery > 1 && ++this.#misses % this.#admitEvery !== 0) return;
    if (this.#map.size >= this.#capacity || this.#keyChars + key.length > this.#maxKeyChars) this.clear();
    this.#keyChars += key.length;
    const bit = sampleHash(key);
    this.#filter[bit >>> 5]! |= 1 << (bit & 31);
    this.#map.set(key, value);
  }

  /** Drops every entry. */
  clear(): void {
    this.#map = new Map();
    this.#keyChars = 0;
    this.#filter.fill(0);
  }

  /** Number of entries held. */
  get size(): number {
    return this.#map.size;
  }

  #adapt(): void {
    const rate = this.#hits / this.#lookups;
    this.#admitEvery = rate < 0.02 ? 16 : rate < 0.2 ? 4 : 1;
    this.#lookups = 0;
    this.#hits = 0;
  }
}
