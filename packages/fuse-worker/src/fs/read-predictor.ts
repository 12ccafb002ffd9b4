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

/** How many recent fresh listings (with regular files) ListingPredictor looks at. */
const LISTINGS = 8;

/**
 * Whether the walker reads the files of the directories it lists (`grep -r`, `tar c`, `cp -r`) or only
 * looks at them (`ls -lR`, `find`, `git status`): at least half of the last LISTINGS fresh listings of
 * directories with regular files saw a READ of one of those files. The read-ahead starts at a listing
 * (ReadAhead.onListing) only while it says yes; it always leaves one file per listing to be READ.
 */
export class ListingPredictor {
  readonly #window: { dir: number; read: boolean }[] = [];

  /** `dir` was listed afresh and has regular files. */
  noteListing(dir: number): void {
    const i = this.#window.findIndex((w) => w.dir === dir);
    if (i !== -1) this.#window.splice(i, 1);
    if (this.#window.length === LISTINGS) this.#window.shift();
    this.#window.push({ dir, read: false });
  }

  /** A file of `dir` was READ from its start. */
  noteRead(dir: number): void {
    for (let i = this.#window.length - 1; i >= 0; i--) {
      const w = this.#window[i]!;
      if (w.dir === dir) {
        w.read = true;
        return;
      }
    }
  }

  get readsFollowListings(): boolean {
    let reads = 0;
    for (const w of this.#window) if (w.read) reads++;
    return this.#window.length > 0 && reads * 2 >= this.#window.length;
  }
}
