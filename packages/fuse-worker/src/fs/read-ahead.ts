// Read-ahead across files. On a cold tree every file a walker reads costs a READ round trip that waits for
// the disk, one file after another, because the kernel sends one request at a time for a sequential
// reader. Walkers (`grep -r`, `tar`, `cp -r`, indexers) read the files of a directory in the order of the
// listing we served, so the files after the one being read are about to be: the binding reads them on its
// own threads and stores the small ones into the kernel's page cache (store-ahead.ts), and the walker
// then reads them with no request at all. Two ways in:
// - from a READ (onLookup): the next DEPTH files after the one read;
// - from a fresh listing (onListing, onListingContinued), while walkers read what they list
//   (ListingPredictor): the listing's first LISTING_DEPTH files, before the walker reads any, except one
//   (the probe), whose READ tells the predictor the walker still reads. They are read and stored as soon
//   as the listing's first part has gone out; the kernel may not hold their nodes yet while it takes that
//   part in (a store is then refused), so those are stored again when it asks for the next part, and that
//   part is answered once they are (readdir-plus.ts): the walker starts reading right after it.
// A stat-only walk (`ls -lR`, `find`, `git status`) reads nothing, so it warms nothing.
import { constants } from 'node:fs';

/**
 * How far ahead of a READ files are read ahead, and how many at once (files; the binding reads them on 8
 * threads). Read ahead through libuv's pool (three requests and two trips through the JS thread per file),
 * 8-64 files ahead at 2-8 at a time, a cold `grep -r` caught up and still sent 4,000 READs. In the
 * binding, a batch is one call and one completion (docs/decisions.md, "Files a walker lists are read ahead on
 * the binding's threads").
 */
const DEPTH = 64;
const IN_FLIGHT = 128;
/** Directories whose position is remembered (a depth-first walk returns to its parents). */
const DIRS = 8;
/**
 * Files read ahead from a fresh listing before the walker reads any of them: a whole directory of the
 * bench's tree (100 files), and at most 128 files of up to 64 KiB stored per walker position, as from a READ
 * (DEPTH 64 of up to 64 KiB, twice).
 */
const LISTING_DEPTH = 128;

/** A directory's listing as served (listing.ts): names in order and each one's file type bits. */
export interface ListedEntries {
  readonly names: readonly string[];
  modeAt(i: number): number;
}

interface DirState {
  readonly entries: ListedEntries;
  readonly index: Map<string, number>;
  /** Entries before this one have been read ahead or skipped. */
  next: number;
  /** Entries from this one on are not read ahead (yet). */
  limit: number;
  /** An entry left alone: the walker's READ of it says it reads what it lists (onListing); -1: none. */
  probe: number;
}

export interface ReadAheadOptions {
  /** The directory's listing as served to the kernel, if still known. */
  readonly listing: (dir: number) => ListedEntries | undefined;
  /**
   * Reads ahead regular files `names` of directory `dir`: stored into the kernel's page cache where that
   * is allowed and `store` is set, else into the host's only. Resolves with the names not stored because
   * the kernel did not hold their nodes (yet). Never rejects.
   */
  readonly warm: (dir: number, names: string[], store: boolean) => Promise<string[]>;
}

export class ReadAhead {
  readonly #options: ReadAheadOptions;
  readonly #dirs = new Map<number, DirState>();
  /** Directories listed afresh: their first read-ahead, done when the listing continues (onListing). */
  readonly #listed = new Map<number, Promise<string[]>>();
  #inFlight = 0;

  constructor(options: ReadAheadOptions) {
    this.#options = options;
  }

  /** The walker READ `name` in directory `dir` from its start: read ahead the files listed after it. */
  onLookup(dir: number, name: string): void {
    let state = this.#dirs.get(dir);
    if (state === undefined) {
      const entries = this.#options.listing(dir);
      if (entries === undefined) return;
      state = newState(entries);
      if (this.#dirs.size >= DIRS) this.#dirs.delete(this.#dirs.keys().next().value!);
    } else {
      this.#dirs.delete(dir); // re-inserted below: most recently used last
    }
    this.#dirs.set(dir, state);
    const at = state.index.get(name);
    if (at === undefined) return;
    if (state.next <= at) state.next = at + 1;
    state.limit = Math.max(state.limit, at + DEPTH + 1);
    void this.#pump(dir, state);
  }

  /**
   * A walker that reads what it lists is getting the first part of `dir`'s listing afresh: its first
   * LISTING_DEPTH files (all but the probe: the last regular file when that is the whole listing) are read
   * ahead and stored once that part has gone out (onListingContinued stores again what the kernel was not
   * ready for).
   */
  onListing(dir: number): void {
    const entries = this.#options.listing(dir);
    if (entries === undefined) return;
    const state = newState(entries);
    state.limit = Math.min(entries.names.length, LISTING_DEPTH);
    if (entries.names.length <= LISTING_DEPTH) {
      for (let i = entries.names.length - 1; i >= 0; i--) {
        if ((entries.modeAt(i) & constants.S_IFMT) === constants.S_IFREG) {
          state.probe = i;
          break;
        }
      }
    }
    this.#dirs.delete(dir);
    if (this.#dirs.size >= DIRS) this.#dirs.delete(this.#dirs.keys().next().value!);
    this.#dirs.set(dir, state);
    // once this part of the listing has gone out (the reply is sent after this returns)
    const first = new Promise<string[]>((resolve) =>
      setImmediate(() => resolve(this.#dirs.get(dir) === state ? (this.#pump(dir, state) ?? []) : [])),
    );
    this.#listed.delete(dir);
    if (this.#listed.size >= DIRS) this.#listed.delete(this.#listed.keys().next().value!);
    this.#listed.set(dir, first);
  }

  /**
   * The kernel asked for more of `dir`'s listing after onListing, so it holds the nodes of the part it
   * had: stores again what it was not ready for. Resolves when the listing's read-ahead is done (the
   * caller answers then, so the walker finds the files); undefined if there is nothing to wait for.
   */
  onListingContinued(dir: number): Promise<void> | undefined {
    const first = this.#listed.get(dir);
    if (first === undefined) return undefined;
    this.#listed.delete(dir);
    return first.then(async (again) => {
      if (again.length === 0) return;
      this.#inFlight += again.length;
      await this.#options.warm(dir, again, true);
      this.#inFlight -= again.length;
    });
  }

  /** Forgets a directory (its listing changed or the kernel forgot it). */
  forget(dir: number): void {
    this.#dirs.delete(dir);
    this.#listed.delete(dir);
  }

  /** Forgets everything (rules changed, discard, commit). */
  clear(): void {
    this.#dirs.clear();
    this.#listed.clear();
  }

  /**
   * Reads ahead the next files of `dir` up to its limit, as many as the budget allows, in one batch;
   * resolves with the names the kernel was not ready for.
   */
  #pump(dir: number, state: DirState): Promise<string[]> | undefined {
    const { names, end } = select(state, state.next, IN_FLIGHT - this.#inFlight);
    state.next = end;
    if (names.length === 0) return undefined;
    this.#inFlight += names.length;
    return this.#options.warm(dir, names, true).finally(() => {
      this.#inFlight -= names.length;
      if (this.#dirs.get(dir) === state) void this.#pump(dir, state);
    });
  }
}

function newState(entries: ListedEntries): DirState {
  return { entries, index: new Map(entries.names.map((name, i) => [name, i])), next: 0, limit: 0, probe: -1 };
}

/** Up to `max` regular files of `state` from entry `from` on, below its limit, the probe left out. */
function select(state: DirState, from: number, max: number): { names: string[]; end: number } {
  const names: string[] = [];
  let at = from;
  while (names.length < max && at < state.entries.names.length && at < state.limit) {
    if (at !== state.probe && (state.entries.modeAt(at) & constants.S_IFMT) === constants.S_IFREG) {
      names.push(state.entries.names[at]!);
    }
    at++;
  }
  return { names, end: at };
}
