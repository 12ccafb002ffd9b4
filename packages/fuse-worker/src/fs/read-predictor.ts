// Whether the files being looked up are about to be read: `grep -r`, `cat`, `tar`, compilers look a file
// up and read it right away; `ls -l`, `git status`, `find -size` only look. The worker reads a small file's
// data ahead (read-ahead.ts, started from LOOKUP in lookup.ts) only while the recent history says reads follow lookups, so stat-only
// walks cost no extra disk reads.

/** How many recent lookups of small readable files the prediction looks at. */
const WINDOW = 32;
/** No prediction before this many samples. */
const MIN_SAMPLES = 8;

interface Sample {
  readonly ino: number;
  read: boolean;
}

/** A sliding window over the last lookups of small readable files and whether each was then read. */
export class ReadPredictor {
  readonly #window: Sample[] = [];
  readonly #byIno = new Map<number, Sample>();
  #reads = 0;

  /** A small readable file was looked up. */
  noteLookup(ino: number): void {
    if (this.#byIno.has(ino)) return;
    if (this.#window.length === WINDOW) {
      const oldest = this.#window.shift()!;
      this.#byIno.delete(oldest.ino);
      if (oldest.read) this.#reads--;
    }
    const sample: Sample = { ino, read: false };
    this.#window.push(sample);
    this.#byIno.set(ino, sample);
  }

  /** A node was read (the kernel sent READ). */
  noteRead(ino: number): void {
    const sample = this.#byIno.get(ino);
    if (sample === undefined || sample.read) return;
    sample.read = true;
    this.#reads++;
  }

  /** True while at least half of the recent small files looked up were then read. */
  get readsFollowLookups(): boolean {
    return this.#window.length >= MIN_SAMPLES && this.#reads * 2 >= this.#window.length;
  }
}
