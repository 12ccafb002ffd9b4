// READDIRPLUS: a listing whose entries carry what a LOOKUP would answer for each of them, so a cold walk
// (grep -r, find, ls -l) needs no LOOKUP round trip per name. The entries are exactly READDIR's (only
// visible ones, same snapshot per directory node) and each one's attributes come from lookup() itself:
// the same permission decision and audit, the same mode bits (the kernel enforces them from its cache
// afterwards), the same timeouts and the same inode reference count. The kernel counts every entry sent
// with attributes as one lookup and FORGETs it later, so only the entries that fit the reply are looked up.
import { readdir } from './dir-listing.js';
import { lookup } from './lookup.js';
import type { FsCore } from './core.js';
import type { Caller, DirEntryOut, EntryReply } from './types.js';

/** A directory entry with its LOOKUP answer (absent: '.', '..', or a name gone or hidden meanwhile). */
export interface DirEntryPlusOut extends DirEntryOut {
  readonly entry?: EntryReply;
}

/**
 * READDIRPLUS from `offset`. `fit` says how many of the names fit the kernel's buffer (the binding packs
 * exactly that many), so no lookup is counted for an entry the kernel never receives.
 */
export async function readdirplus(
  fs: FsCore,
  ino: number,
  offset: number,
  caller: Caller,
  fit: (names: readonly string[]) => number,
): Promise<readonly DirEntryPlusOut[]> {
  const listing = await readdir(fs, ino, offset, caller);
  if (offset === 0) fs.cache.listed(ino);
  const sent = listing.slice(0, fit(listing.map((e) => e.name)));
  return Promise.all(sent.map((e) => withEntry(fs, ino, e, caller)));
}

async function withEntry(
  fs: FsCore,
  parent: number,
  e: DirEntryOut,
  caller: Caller,
): Promise<DirEntryPlusOut> {
  if (e.name === '.' || e.name === '..') return e;
  try {
    const entry = await lookup(fs, parent, e.name, caller, true);
    // d_ino and the attributes' inode number agree, as they would after a LOOKUP
    return 'attr' in entry ? { ...e, ino: entry.attr.ino, entry } : e;
  } catch {
    // removed or hidden since the listing was made: a plain entry; a later LOOKUP decides it
    return e;
  }
}
