// ReadPredictor and ReadAhead: when files are warmed ahead of a walker, and which.
import { constants } from 'node:fs';
import { describe, expect, it } from 'vitest';

import { ListingBuilder } from '../../src/fs/listing.js';
import { ReadAhead } from '../../src/fs/read-ahead.js';
import { ListingPredictor, ReadPredictor } from '../../src/fs/read-predictor.js';

const FILE = constants.S_IFREG;
const DIR = constants.S_IFDIR;

describe('ReadPredictor', () => {
  it('predicts reads once half of the recent lookups were read, and stops when they are not', () => {
    const p = new ReadPredictor();
    for (let ino = 1; ino <= 7; ino++) {
      p.noteLookup(ino);
      p.noteRead(ino);
    }
    expect(p.readsFollowLookups).toBe(false); // fewer than 8 samples: no opinion yet
    p.noteLookup(8);
    expect(p.readsFollowLookups).toBe(true);
    // A stat-only walk follows: 32 lookups without reads push the reads out of the window.
    for (let ino = 100; ino < 116; ino++) p.noteLookup(ino);
    expect(p.readsFollowLookups).toBe(false); // 7 read of 24
    p.noteRead(100);
    p.noteRead(100); // a second READ of the same file counts once
    expect(p.readsFollowLookups).toBe(false);
    for (let ino = 200; ino < 232; ino++) p.noteLookup(ino);
    expect(p.readsFollowLookups).toBe(false);
    p.noteRead(1); // read long after it left the window: ignored
    expect(p.readsFollowLookups).toBe(false);
  });
});

describe('ListingPredictor', () => {
  it('says walkers read what they list while half of the recent listings had a READ, and stops when they do not', () => {
    const p = new ListingPredictor();
    expect(p.readsFollowListings).toBe(false); // no listing seen yet
    p.noteListing(10);
    expect(p.readsFollowListings).toBe(false);
    p.noteRead(10); // `grep -r`: a file of the listed directory was read
    expect(p.readsFollowListings).toBe(true);
    p.noteListing(11);
    p.noteRead(11);
    // `ls -lR` follows: listings without READs push the reads out of the window of 8
    for (let dir = 20; dir < 23; dir++) p.noteListing(dir);
    expect(p.readsFollowListings).toBe(false); // 2 read of 5
    p.noteRead(99); // a READ in a directory not listed lately counts for nothing
    expect(p.readsFollowListings).toBe(false);
    p.noteRead(20);
    expect(p.readsFollowListings).toBe(true); // 3 of 5
    for (let dir = 30; dir < 38; dir++) p.noteListing(dir);
    expect(p.readsFollowListings).toBe(false);
  });
});

interface ListedEntry {
  readonly name: string;
  readonly mode: number;
}

describe('ReadAhead', () => {
  function setup(entries: ListedEntry[]) {
    const builder = new ListingBuilder();
    for (const e of [{ name: '.', mode: DIR }, { name: '..', mode: DIR }, ...entries]) {
      builder.add(e.name, 1, e.mode);
    }
    const listing = builder.build();
    const batches: { names: string[]; store: boolean; done: (noNode: string[]) => void }[] = [];
    const ra = new ReadAhead({
      listing: (dir) => (dir === 7 ? listing : undefined),
      warm: (_dir, names, store) =>
        new Promise<string[]>((done) => batches.push({ names: [...names], store, done })),
    });
    const warmed = (): string[] => batches.flatMap((b) => b.names);
    const finish = async (noNode: string[] = []): Promise<void> => {
      batches.find((b) => b.done !== undefined && !('finished' in b))?.done(noNode);
      const b = batches.find((x) => !('finished' in x));
      if (b !== undefined) Object.assign(b, { finished: true });
      await new Promise((r) => setImmediate(r));
    };
    return { ra, batches, warmed, finish };
  }

  const files = (n: number): ListedEntry[] =>
    Array.from({ length: n }, (_, i) => ({ name: `f${i}`, mode: FILE }));

  const names = (from: number, to: number): string[] =>
    Array.from({ length: to - from + 1 }, (_, i) => `f${from + i}`);

  it('after a READ, stores the regular files listed after it in one batch, at most 64 entries ahead', async () => {
    const { ra, batches, warmed, finish } = setup([
      ...files(3),
      { name: 'sub', mode: DIR },
      ...files(100).slice(3),
    ]);
    ra.onLookup(7, 'f0');
    // one batch; 'sub' skipped: directories are not read ahead; f0 + 64 listed entries (sub is one)
    expect(batches).toHaveLength(1);
    expect(batches[0]!.store).toBe(true);
    expect(warmed()).toEqual(names(1, 63));
    await finish();
    expect(batches).toHaveLength(1); // nothing more until the walker moves on
    ra.onLookup(7, 'f5');
    expect(warmed().slice(63)).toEqual(names(64, 69)); // up to f5 + 64 listed entries
  });

  it('does nothing for a directory whose listing is not known, or a name not in it; forgets on request', async () => {
    const { ra, warmed, finish } = setup(files(100));
    ra.onLookup(8, 'f0');
    ra.onLookup(7, 'nope');
    expect(warmed()).toEqual([]);
    ra.onLookup(7, 'f0');
    ra.clear(); // the batch in flight finishes without starting another
    await finish();
    expect(warmed()).toEqual(names(1, 64));
    ra.onLookup(7, 'f80'); // a fresh start from f80: nothing behind it is read ahead
    expect(warmed().slice(64)).toEqual(names(81, 99));
  });

  it('from a fresh listing: every file but the last (the probe) is stored once the listing has gone out', async () => {
    const { ra, batches, warmed } = setup([...files(40), { name: 'sub', mode: DIR }]);
    ra.onListing(7);
    expect(batches).toHaveLength(0); // not while the listing is still being answered
    await new Promise((r) => setImmediate(r));
    expect(batches).toHaveLength(1);
    expect(batches[0]!.store).toBe(true);
    // f39, the last regular file, is left to be READ: that READ says the walker still reads what it lists
    expect(warmed()).toEqual(names(0, 38));
  });

  it('a listing of more than 128 entries: its first 128 are stored, the rest follow the READs', async () => {
    const { ra, warmed, finish } = setup(files(300));
    ra.onListing(7);
    await new Promise((r) => setImmediate(r));
    expect(warmed()).toEqual(names(0, 125)); // '.' and '..' are two of the 128 entries; no probe
    await finish();
    ra.onLookup(7, 'f126'); // the walker READs the first file not stored
    expect(warmed().slice(126)).toEqual(names(127, 190)); // up to f126 + 64 listed entries
  });

  it('when the listing continues, stores again what the kernel was not ready for, and resolves after', async () => {
    const { ra, batches, finish } = setup(files(10));
    ra.onListing(7);
    await new Promise((r) => setImmediate(r));
    const continued = ra.onListingContinued(7);
    expect(continued).toBeDefined();
    let settled = false;
    void continued!.then(() => (settled = true));
    await finish(['f0', 'f1']); // the kernel had not taken in these two nodes yet
    expect(batches).toHaveLength(2);
    expect(batches[1]!.names).toEqual(['f0', 'f1']);
    expect(settled).toBe(false);
    await finish();
    expect(settled).toBe(true);
    expect(ra.onListingContinued(7)).toBeUndefined(); // once per listing
  });

  it('a listing forgotten before it continues has nothing to wait for', async () => {
    const { ra, batches } = setup(files(10));
    ra.onListing(7);
    ra.forget(7);
    await new Promise((r) => setImmediate(r));
    expect(batches).toHaveLength(0);
    expect(ra.onListingContinued(7)).toBeUndefined();
  });
});
