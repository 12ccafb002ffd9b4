// READDIR: '.', '..', then the merged entries (codebase + delta, whiteouts removed) the rules let the
// sandbox see, kept per directory node so offset > 0 continues the same snapshot (listing.ts).
import { constants } from 'node:fs';
import type { FsCore } from './core.js';
import { visiblePermission } from './decisions.js';
import { ROOT_INO } from './inodes.js';
import { ListingBuilder } from './listing.js';
import type { Listing } from './listing.js';
import type { Caller, DirEntryOut } from './types.js';

const S_IFDIR = constants.S_IFDIR;
const S_IFIFO = constants.S_IFIFO;

/**
 * READDIR: '.', '..', then the merged entries the rules let the sandbox see, from `offset`; at most `max`
 * of them (the binding passes how many could fit its reply at best).
 */
export async function readdir(
  fs: FsCore,
  ino: number,
  offset: number,
  caller: Caller,
  max = Infinity,
): Promise<readonly DirEntryOut[]> {
  const listing = await listingFrom(fs, ino, offset, caller);
  return listing.entries(offset, offset + max);
}

/**
 * The listing a READDIR or READDIRPLUS from `offset` is served from: a new snapshot at offset 0, else the
 * directory's kept one (a new one when none is kept: the kernel continues from its offset in it).
 */
export async function listingFrom(fs: FsCore, ino: number, offset: number, caller: Caller): Promise<Listing> {
  let listing = offset === 0 ? undefined : fs.listings.get(ino);
  if (listing === undefined) {
    const path = fs.pathOrStale(ino);
    visiblePermission(fs, path, true, caller, 'readdir');
    listing = await list(fs, ino, path);
    fs.listings.set(ino, listing);
    // A new snapshot went out (a plain READDIR, or the start of a READDIRPLUS that remembers its own):
    // a remembered answer of the old one must not be handed out after it (listing-replay.ts).
    fs.cache.replays.drop(ino);
  }
  return listing;
}

async function list(fs: FsCore, ino: number, path: string): Promise<Listing> {
  const node = fs.node(ino);
  const out = new ListingBuilder();
  out.add('.', node.stIno, S_IFDIR);
  out.add('..', ROOT_INO, S_IFDIR);
  for (const entry of await fs.delta.readdir(path)) {
    const child = path === '/' ? `/${entry.name}` : `${path}/${entry.name}`;
    const isDir = entry.type === 'directory';
    const permission = fs.rules.permissionOf(child);
    if (permission === 'none' && !(isDir && fs.rules.isTraversable(child))) continue;
    const known = fs.inodes.child(ino, entry.name);
    out.add(
      entry.name,
      known !== undefined && known.stIno !== 0 ? known.stIno : syntheticIno(child),
      typeBits(entry.type),
    );
  }
  return out.build();
}

function typeBits(type: string): number {
  switch (type) {
    case 'directory':
      return S_IFDIR;
    case 'symlink':
      return constants.S_IFLNK;
    case 'fifo':
      return S_IFIFO;
    case 'file':
      return constants.S_IFREG;
    default:
      return 0; // DT_UNKNOWN: the kernel/tools stat the entry
  }
}

/** A stable, non-zero d_ino for entries the kernel has not looked up yet (FNV-1a of the path). */
function syntheticIno(path: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) {
    hash ^= path.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash === 0 ? 1 : hash;
}
