// READDIRPLUS answers remembered per directory, to hand the kernel again what it already had.
//
// Why: when a READ completes, the kernel marks the file's atime stale (fuse_invalidate_atime), so the next
// stat of every file a walker read costs a round trip even though nothing changed. The worker drops the
// directory's cached listing on the first READ in it (KernelCache.noteRead), and the next listing is one
// READDIRPLUS that refreshes every entry at once. Building that answer again (a host lstat, the rules, the
// inode table, per entry) was most of the worker's time in a `grep -r` right after a cold one
// (docs/decisions.md, "After READs a listing goes stale at its second entry and is handed again from its
// bytes"). Nothing the answer says has changed, so it is replayed instead.
//
// What keeps a replay exactly as true as the first answer:
// - The kernel gets each entry's attributes with the time left of the first answer's timeout, never a
//   new one: what it holds expires when it would have without the READ. A change behind the mount (a
//   host editor, another sandbox's commit) is seen within the attribute timeout, as before.
// - Any change through the mount (every mutating FUSE op, at its start and end: `mutated`) and every
//   invalidation of the kernel's caches (rules, discard, commit, writeFile: `generation`) drops them all.
//   A listing built while one of those ran is not remembered.
// - An entry's node must still be the one the kernel was told about (same node id under that name);
//   each replayed entry counts as one more kernel lookup of it, as a fresh answer would.
// - The directory's own visibility is decided again, with the same audit; with allowed accesses audited
//   the listing is always rebuilt (each entry's lookup is an audit record).
import type { FsCore } from './core.js';
import { visiblePermission } from './decisions.js';
import { recordLength, setTimeouts } from './direntplus-pack.js';
import type { DirEntryPlusOut, PackedDirents } from './direntplus-pack.js';
import type { Listing } from './listing.js';
import type { Caller } from './types.js';

/** Below this much time left, an entry is not worth replaying (the kernel would ask again soon). */
const MIN_LEFT_SECONDS = 1;
/** How often remembered answers are checked for age while there are any. */
const SWEEP_MS = 10_000;
/** Bound on remembered entries (~170 bytes each): a 30,000-file tree; the oldest directories go first. */
const MAX_ENTRIES = 32_768;

interface Remembered {
  /**
   * The listing snapshot the answer was built from (restored as the directory's listing on replay), whole:
   * its entries from index `first` on are the ones sent with attributes, the ones before are '.' and '..'.
   */
  readonly listing: Listing;
  readonly first: number;
  /** The answer's bytes (never written to: a replay rewrites a copy). */
  readonly bytes: Buffer;
  /** The node id each entry from `first` on was sent with. */
  readonly inos: readonly number[];
  readonly count: number;
  readonly generation: number;
  /** When the answer was built (ms, monotonic) and the timeout it was sent with (seconds). */
  readonly at: number;
  readonly ttl: number;
}

/** The remembered READDIRPLUS answers of one PolicyFs. */
export class ListingReplays {
  readonly #byDir = new Map<number, Remembered>();
  #entries = 0;
  /** Bumped at the start and end of every change made through the mount. */
  epoch = 0;
  /** Set at mount: on with READDIRPLUS and listingRefresh unless AGENTFENSE_FUSE_DISABLE names it. */
  enabled = false;
  /** The timer of the next #prune while anything is remembered. */
  #sweep: NodeJS.Timeout | undefined;

  /** A change through the mount starts or ends: nothing remembered may be replayed. */
  mutated(): void {
    this.epoch++;
    this.clear();
  }

  clear(): void {
    this.#byDir.clear();
    this.#entries = 0;
  }

  /**
   * Drops answers too old to be replayed (oldest first: the map is in the order they were remembered), so
   * an idle worker does not keep a walk's listings (~170 bytes per entry) past the attribute timeout.
   */
  #prune(): void {
    const now = performance.now();
    for (const [dir, r] of this.#byDir) {
      if (r.ttl - (now - r.at) / 1000 >= MIN_LEFT_SECONDS) break;
      this.drop(dir);
    }
    if (this.#byDir.size > 0 && this.#sweep === undefined) {
      this.#sweep = setTimeout(() => {
        this.#sweep = undefined;
        this.#prune();
      }, SWEEP_MS);
      this.#sweep.unref();
    }
  }

  /** The directory's listing changed or the kernel forgot it. */
  drop(dir: number): void {
    const r = this.#byDir.get(dir);
    if (r === undefined) return;
    this.#byDir.delete(dir);
    this.#entries -= r.count;
  }

  /**
   * Remembers a whole-directory answer sent from offset 0. `epoch` and `generation` are the values when
   * the listing was started: if either moved, something changed meanwhile and nothing is remembered.
   */
  remember(
    fs: FsCore,
    dir: number,
    listing: Listing,
    entries: readonly DirEntryPlusOut[],
    packed: PackedDirents,
    since: { readonly epoch: number; readonly generation: number },
  ): void {
    if (!this.enabled || since.epoch !== this.epoch || since.generation !== fs.cache.generation) return;
    if (fs.ttl <= MIN_LEFT_SECONDS || entries.length !== listing.length) return;
    let first = 0;
    while (first < entries.length && (entries[first]!.name === '.' || entries[first]!.name === '..')) first++;
    const inos: number[] = [];
    for (let i = first; i < entries.length; i++) {
      const e = entries[i]!;
      // an entry sent without attributes (gone or hidden meanwhile) or with a shortened timeout
      if (e.entry === undefined || e.entry.attrTimeout !== fs.ttl || e.entry.entryTimeout !== fs.ttl) return;
      if (e.name !== listing.names[i]) return;
      inos.push(e.entry.ino);
    }
    if (inos.length !== packed.attrAt.length) return;
    this.drop(dir);
    while (this.#entries + entries.length > MAX_ENTRIES && this.#byDir.size > 0) {
      this.drop(this.#byDir.keys().next().value!);
    }
    if (entries.length > MAX_ENTRIES) return;
    this.#byDir.set(dir, {
      listing,
      first,
      bytes: packed.bytes,
      inos,
      count: entries.length,
      generation: fs.cache.generation,
      at: performance.now(),
      ttl: fs.ttl,
    });
    this.#entries += entries.length;
    this.#prune();
  }

  /**
   * The remembered answer for a READDIRPLUS of `dir` from offset 0, with the timeouts that are left, or
   * undefined when it cannot be replayed exactly (then the caller builds a new one).
   */
  replay(
    fs: FsCore,
    dir: number,
    caller: Caller,
    fit: (names: readonly string[]) => number,
  ): Buffer | undefined {
    const r = this.#byDir.get(dir);
    if (r === undefined) return undefined;
    const left = r.ttl - (performance.now() - r.at) / 1000;
    if (r.generation !== fs.cache.generation || left < MIN_LEFT_SECONDS || fs.audit.allowed) {
      this.drop(dir);
      return undefined;
    }
    const names = r.listing.names;
    if (fit(names) < r.count) return undefined;
    const path = fs.inodes.pathOf(dir);
    if (path === null) return undefined;
    // Checked before anything is counted, so a failed replay leaves no trace.
    for (let i = r.first; i < r.count; i++) {
      if (fs.inodes.child(dir, names[i]!)?.ino !== r.inos[i - r.first]) {
        this.drop(dir);
        return undefined;
      }
    }
    visiblePermission(fs, path, true, caller, 'readdir');
    // A copy: the reply is sent after an await, and another replay of this directory may run meanwhile.
    const bytes = Buffer.from(r.bytes);
    let at = 0;
    for (let i = 0; i < r.count; i++) {
      if (i >= r.first) {
        setTimeouts(bytes, at, left);
        const node = fs.inodes.get(r.inos[i - r.first]!)!;
        node.nlookup++; // the kernel counts every entry sent with attributes as a lookup
        if (node.isDir) fs.cache.dirAttrs.note(node.ino, left);
      }
      at += recordLength(bytes, at);
    }
    fs.listings.set(dir, r.listing);
    return bytes;
  }
}
