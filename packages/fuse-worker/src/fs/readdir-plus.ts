// READDIRPLUS: a listing whose entries carry what a LOOKUP would answer for each of them, so a cold walk
// (grep -r, find, ls -l) needs no LOOKUP round trip per name. The entries are exactly READDIR's (only
// visible ones, same snapshot per directory node) and each one's attributes come from lookup() itself:
// the same permission decision and audit, the same mode bits (the kernel enforces them from its cache
// afterwards), the same timeouts and the same inode reference count. The kernel counts every entry sent
// with attributes as one lookup and FORGETs it later, so only the entries that fit the reply are looked up.
// The answer is packed here (direntplus-pack.ts) and kept, so the kernel can be handed it again when a
// READ made it drop the listing and nothing changed since (listing-replay.ts). A walker that reads what
// it lists gets the listed files read ahead and stored (read-ahead.ts): from the listing's first part on,
// and its last part is answered once they are, because the walker starts reading right after it.
import { constants } from 'node:fs';
import { listingFrom } from './dir-listing.js';
import type { Listing } from './listing.js';
import { lookup } from './lookup.js';
import type { FsCore } from './core.js';
import { packDirentsPlus } from './direntplus-pack.js';
import type { DirEntryPlusOut } from './direntplus-pack.js';
import type { Caller, DirEntryOut } from './types.js';

export type { DirEntryPlusOut } from './direntplus-pack.js';

const { S_IFDIR, S_IFMT, S_IFREG } = constants;

/**
 * READDIRPLUS from `offset`, as the bytes of the reply. `fit` says how many of the names fit the kernel's
 * buffer (the binding's fitDirentsPlus), so no lookup is counted for an entry the kernel never receives.
 */
export async function readdirplus(
  fs: FsCore,
  ino: number,
  offset: number,
  caller: Caller,
  fit: (names: readonly string[]) => number,
): Promise<Buffer> {
  if (offset === 0) {
    // The kernel asks again only because a READ made its attributes stale (listing-replay.ts).
    const started = performance.now();
    const replayed = fs.cache.replays.replay(fs, ino, caller, fit);
    if (replayed !== undefined) {
      fs.cache.listed(ino);
      // counted apart so `stats` (and bench:fs) show how many listings were handed again
      fs.stats?.record('listing-replay', (performance.now() - started) * 1000, false);
      return replayed;
    }
  }
  const since = { epoch: fs.cache.replays.epoch, generation: fs.cache.generation };
  // A listing asked for again after READs is sent whole with attributes, so it can be replayed
  // (listing-replay.ts keeps only answers whose every entry carries them).
  const refresh = offset === 0 && fs.cache.readSinceListed(ino);
  const listing = await listingFrom(fs, ino, offset, caller);
  // The entry warm-up's walker (entry-warmup.ts) lists ahead of the sandbox: no walker of the sandbox's
  // reads what it lists, so its listings neither start the read-ahead nor teach the predictor anything.
  const walker = fs.warmup?.isWalker(caller) === true;
  if (offset === 0) {
    fs.cache.listed(ino);
    // Listing a directory afresh makes the kernel mark its atime stale, as a READ does a file's; the
    // walker stats nothing it lists, and counting its listings would drop the attributes of every
    // directory it walked (a GETATTR at the sandbox's next path walk through each).
    if (!walker) fs.cache.noteRead(fs.inodes.get(ino));
  }
  const names = offset === 0 ? listing.names : listing.names.slice(offset);
  const sent = listing.entries(offset, offset + fit(names));
  const looked = walker
    ? await inSlices(fs, ino, sent, caller)
    : await Promise.all(
        sent.map((e) =>
          !refresh && heldFresh(fs, ino, e) ? Promise.resolve(plain(fs, e)) : withEntry(fs, ino, e, caller),
        ),
      );
  // An invalidation (rule change, discard, commit, audit switched on) began while the answer was made:
  // entries looked up before it must not outlive it in the kernel's caches (lookup() covers only an
  // invalidation during its own await; the walker's slices wait for the sandbox's gaps in between).
  const out = fs.cache.generation === since.generation ? looked : looked.map((e) => uncached(fs, e));
  const packed = packDirentsPlus(out);
  if (offset === 0) {
    fs.cache.replays.remember(fs, ino, listing, out, packed, since);
    if (!walker && fs.readAheadOnRead && hasRegular(listing)) {
      if (fs.listingPredictor.readsFollowListings) fs.readAhead.onListing(ino);
      fs.listingPredictor.noteListing(ino);
    }
  } else if (!walker) {
    // The kernel took in the first part (it holds those nodes now) and the walker starts reading as soon
    // as it has this one: the files read ahead for it are stored first, for at most HEAD_WAIT_MS.
    const stored = fs.readAhead.onListingContinued(ino);
    // never fails the listing: the read-ahead is an optimization
    if (stored !== undefined) await withTimeout(stored, HEAD_WAIT_MS).catch(() => undefined);
  }
  return packed.bytes;
}

/**
 * How long the rest of a listing waits for its files to be stored (ReadAhead.onListingContinued): ~1 ms
 * for 99 files of the bench's tree read from the host's cache, more from the disk; a walker that
 * overtakes the stores sends a READ for each file it gets to first.
 */
const HEAD_WAIT_MS = 2;

function withTimeout(done: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Promise.race([done, late]).finally(() => clearTimeout(timer));
}

function hasRegular(listing: Listing): boolean {
  for (let i = 0; i < listing.length; i++) if ((listing.modeAt(i) & S_IFMT) === S_IFREG) return true;
  return false;
}

/** Entries looked up between two turns of the event loop for the warm-up's walker. */
const WALKER_SLICE = 16;

/**
 * The warm-up's walker (entry-warmup.ts) lists whole directories ahead of the sandbox: its entries are
 * looked up a slice at a time, each only once the sandbox has left the worker idle for a moment, so a
 * request of the sandbox never waits behind more than one slice.
 */
async function inSlices(
  fs: FsCore,
  ino: number,
  sent: readonly DirEntryOut[],
  caller: Caller,
): Promise<DirEntryPlusOut[]> {
  const out: DirEntryPlusOut[] = [];
  const dir = fs.inodes.pathOf(ino);
  const generation = fs.cache.generation;
  for (let i = 0; i < sent.length; i += WALKER_SLICE) {
    await fs.warmup?.whenIdle();
    if (fs.cache.generation !== generation) {
      // invalidated meanwhile (the walker is being killed): the rest as bare names, looked up by no one
      out.push(...sent.slice(i));
      break;
    }
    // The inodes first, from the thread pool: the lookups below are synchronous where the parent's fd is
    // cached, and a cold inode would hold the JS thread for a disk read while the sandbox waits.
    const names = sent
      .slice(i, i + WALKER_SLICE)
      .flatMap((e) => (e.name === '.' || e.name === '..' ? [] : [e.name]));
    if (dir !== null) await fs.delta.warmEntries(dir, names);
    out.push(
      ...(await Promise.all(sent.slice(i, i + WALKER_SLICE).map((e) => withEntry(fs, ino, e, caller, true)))),
    );
  }
  return out;
}

/**
 * Whether the kernel holds the listed name's entry and attributes fresh (entry-freshness.ts): then it is
 * sent plain, and the kernel keeps what it has. Never for a directory (its attributes go stale with every
 * change inside it) nor for the warm-up's walker, whose listings are what make names fresh.
 */
function heldFresh(fs: FsCore, dir: number, e: DirEntryOut): boolean {
  if (e.name === '.' || e.name === '..' || (e.mode & S_IFMT) === S_IFDIR) return false;
  const node = fs.inodes.child(dir, e.name);
  return node !== undefined && node.nlookup > 0 && fs.cache.entries.isFresh(node.ino, fs.cache.generation);
}

/** A plain entry (no node id, no attributes), counted in `stats` so a bench shows how many went out so. */
function plain(fs: FsCore, e: DirEntryOut): DirEntryPlusOut {
  fs.stats?.record('plain-entry', 0, false);
  return e;
}

/** An entry the kernel may use for this request only (timeouts 0), its directory attributes not held. */
function uncached(fs: FsCore, e: DirEntryPlusOut): DirEntryPlusOut {
  if (e.entry === undefined) return e;
  fs.cache.dirAttrs.drop(e.entry.ino);
  return { ...e, entry: { ...e.entry, entryTimeout: 0, attrTimeout: 0 } };
}

async function withEntry(
  fs: FsCore,
  parent: number,
  e: DirEntryOut,
  caller: Caller,
  background = false,
): Promise<DirEntryPlusOut> {
  if (e.name === '.' || e.name === '..') return e;
  try {
    const entry = await lookup(fs, parent, e.name, caller, true, background);
    // d_ino and the attributes' inode number agree, as they would after a LOOKUP
    return 'attr' in entry ? { ...e, ino: entry.attr.ino, entry } : e;
  } catch {
    // removed or hidden since the listing was made: a plain entry; a later LOOKUP decides it
    return e;
  }
}
