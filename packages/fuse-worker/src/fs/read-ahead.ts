// Read-ahead across files. On a cold tree every file a walker reads costs the worker a synchronous disk
// read inside its READ, one file after another, because the kernel sends one request at a time for a
// sequential reader. Walkers (`grep -r`, `tar`, `cp -r`, indexers) look files up in the order of the
// listing we served, so when file i is looked up, files i+1..i+DEPTH are about to be: reading their first
// bytes into the host page cache from the thread pool, while the walker and the kernel are busy with
// file i, overlaps the disk with everything else. Only while reads follow lookups (ReadPredictor), so a
// stat-only walk (`ls -l`, `git status`) costs no extra disk reads.
import { constants } from 'node:fs';

/**
 * How far ahead of the current lookup files are warmed, and how many warm-ups run in the thread pool at
 * once. The worker's pool has 10 threads (WORKER_ENV), so 2 stay free for big READs. 8 ahead, 2 at a time
 * (sessions 3-5) warmed ~4,600 files/s against a cold `grep -r` that reads ~4,000/s, so most of its READs
 * still waited for the disk inside the worker (READ p50 91-108 µs); 16 and 4 brought the READ p50 to
 * 64 µs (session 6). Since the warm-ups also store small files into the kernel's page cache
 * (store-ahead.ts), every file warmed before the walker reaches it is a READ saved: 64 and 8 halved a cold
 * `grep -r`'s READs (10,034 -> 4,300-5,200) and its time (bench/README.md, session 8). The disk is the
 * limit beyond that: 12 at a time took 1 ms per warm-up instead of 0.7 and read no faster.
 */
const DEPTH = 64;
const IN_FLIGHT = 8;
/** Directories whose position is remembered (a depth-first walk returns to its parents). */
const DIRS = 8;

/** One listed entry: its name and file type bits. */
export interface ListedEntry {
  readonly name: string;
  readonly mode: number;
}

interface DirState {
  readonly entries: readonly ListedEntry[];
  readonly index: Map<string, number>;
  /** Entries before this one have been warmed or skipped. */
  next: number;
  /** Index of the latest lookup. */
  cursor: number;
}

export interface ReadAheadOptions {
  /** The directory's listing as served to the kernel, if still known. */
  readonly listing: (dir: number) => readonly ListedEntry[] | undefined;
  /** Reads the start of `name` in `dir` into the host page cache; must never reject. */
  readonly warm: (dir: number, name: string) => Promise<void>;
}

export class ReadAhead {
  readonly #options: ReadAheadOptions;
  readonly #dirs = new Map<number, DirState>();
  #inFlight = 0;

  constructor(options: ReadAheadOptions) {
    this.#options = options;
  }

  /** The walker looked up `name` in directory `dir`: warm the regular files listed after it. */
  onLookup(dir: number, name: string): void {
    let state = this.#dirs.get(dir);
    if (state === undefined) {
      const entries = this.#options.listing(dir);
      if (entries === undefined) return;
      state = { entries, index: new Map(entries.map((e, i) => [e.name, i])), next: 0, cursor: 0 };
      if (this.#dirs.size >= DIRS) this.#dirs.delete(this.#dirs.keys().next().value!);
    } else {
      this.#dirs.delete(dir); // re-inserted below: most recently used last
    }
    this.#dirs.set(dir, state);
    const at = state.index.get(name);
    if (at === undefined) return;
    state.cursor = at;
    if (state.next <= at) state.next = at + 1;
    this.#pump(dir, state);
  }

  /** Forgets a directory (its listing changed or the kernel forgot it). */
  forget(dir: number): void {
    this.#dirs.delete(dir);
  }

  /** Forgets everything (rules changed, discard, commit). */
  clear(): void {
    this.#dirs.clear();
  }

  #pump(dir: number, state: DirState): void {
    while (
      this.#inFlight < IN_FLIGHT &&
      state.next < state.entries.length &&
      state.next <= state.cursor + DEPTH
    ) {
      const entry = state.entries[state.next++]!;
      if ((entry.mode & constants.S_IFMT) !== constants.S_IFREG) continue;
      this.#inFlight++;
      void this.#options.warm(dir, entry.name).finally(() => {
        this.#inFlight--;
        if (this.#dirs.get(dir) === state) this.#pump(dir, state);
      });
    }
  }
}
