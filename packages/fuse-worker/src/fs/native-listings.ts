// READDIRPLUS and READDIR answered by the binding, in C, without entering JS (fuse-native's
// native/fast-listing.c).
//
// Only for directories the lookup fast path marked with an st_ino (native-lookups.ts dirAttrs: only the
// writable layer holds the directory, it and every path below it are `write`, the codebase lacks it; the
// same revocations), only while the audit records no allowed access, never for the entry warm-up's walker
// (its listings are what make the kernel hold entries, entry-warmup.ts) and only while walkers do not read
// what they list (ListingPredictor: the worker's own listings start the read-ahead, read-ahead.ts). There
// the listing dir-listing.ts would make is the upper directory's entries in name order, none hidden and
// nothing merged; the binding sends each as a plain entry (no node id, so no lookup the kernel counts and
// no FORGET to follow), numbered as listing.ts numbers them. A listing from offset 0 answered there is
// handed over here before the worker's next request (`adopt`): the worker's own snapshot of the directory
// is dropped (a later part it answers is listed afresh, never from an older snapshot), and what a listing
// notes in readdir-plus.ts is noted (listed, the directory's atime, the predictor).
import type { FastCreated, FastCreates } from '@agentfense/fuse-native';
import type { FsCore } from './core.js';

export interface NativeListingsOptions {
  readonly fast: FastCreates;
  readonly core: FsCore;
}

export class NativeListings {
  readonly #fast: FastCreates;
  readonly #core: FsCore;
  #counted = 0;

  constructor(options: NativeListingsOptions) {
    this.#fast = options.fast;
    this.#core = options.core;
    this.refresh();
  }

  /** Serves listings while walkers do not read what they list; the walker's pid is never served. */
  refresh(): void {
    const core = this.#core;
    this.#fast.listings = !(core.readAheadOnRead && core.listingPredictor.readsFollowListings);
    this.#fast.skipPid = core.warmup?.walkerPid;
  }

  /** The binding listed directory `c.ino` from offset 0 (`c.fd` 1: it holds a regular file). */
  adopt(c: FastCreated): void {
    const core = this.#core;
    core.forgetListing(c.ino);
    core.cache.listed(c.ino);
    core.cache.noteRead(core.inodes.get(c.ino));
    if (core.readAheadOnRead && c.fd === 1) core.listingPredictor.noteListing(c.ino);
  }

  /** Listing requests the binding answered since the mount. */
  get answered(): number {
    return this.#fast.listingsServed;
  }

  /** Counts the listing requests answered since the last call as `readdirplus-native`. */
  count(): void {
    const served = this.#fast.listingsServed;
    const stats = this.#core.stats;
    if (stats !== undefined)
      for (let i = this.#counted; i < served; i++) stats.record('readdirplus-native', 0, false);
    this.#counted = served;
  }
}
