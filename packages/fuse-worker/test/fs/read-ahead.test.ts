// ReadPredictor and ReadAhead: when files are warmed ahead of a walker, and which.
import { constants } from 'node:fs';
import { describe, expect, it } from 'vitest';

import { ReadAhead, type ListedEntry } from '../../src/fs/read-ahead.js';
import { ReadPredictor } from '../../src/fs/read-predictor.js';

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

describe('ReadAhead', () => {
  function setup(entries: ListedEntry[]) {
    const listing = [{ name: '.', mode: DIR }, { name: '..', mode: DIR }, ...entries];
    const warmed: string[] = [];
    const pending: (() => void)[] = [];
    const ra = new ReadAhead({
      listing: (dir) => (dir === 7 ? listing : undefined),
      warm: (_dir, name) => {
        warmed.push(name);
        return new Promise<void>((resolve) => pending.push(resolve));
      },
    });
    const finishOne = async (): Promise<void> => {
      pending.shift()?.();
      await new Promise((r) => setImmediate(r));
    };
    return { ra, warmed, pending, finishOne };
  }

  const files = (n: number): ListedEntry[] =>
    Array.from({ length: n }, (_, i) => ({ name: `f${i}`, mode: FILE }));

  const names = (from: number, to: number): string[] =>
    Array.from({ length: to - from + 1 }, (_, i) => `f${from + i}`);

  it('warms the regular files listed after the one looked up, eight at a time, at most 64 ahead', async () => {
    const { ra, warmed, finishOne } = setup([...files(3), { name: 'sub', mode: DIR }, ...files(80).slice(3)]);
    ra.onLookup(7, 'f0');
    // eight in flight; 'sub' skipped: directories are not warmed
    expect(warmed).toEqual(names(1, 8));
    await finishOne();
    expect(warmed).toEqual(names(1, 9));
    for (let i = 0; i < 80; i++) await finishOne();
    // Nothing beyond f0 + 64 listed entries (sub counts as one) until the walker moves on.
    expect(warmed).toEqual(names(1, 63));
    ra.onLookup(7, 'f5');
    expect(warmed.slice(63)).toEqual(names(64, 69)); // up to f5 + 64 listed entries
  });

  it('does nothing for a directory whose listing is not known, or a name not in it; forgets on request', async () => {
    const { ra, warmed, finishOne } = setup(files(20));
    ra.onLookup(8, 'f0');
    ra.onLookup(7, 'nope');
    expect(warmed).toEqual([]);
    ra.onLookup(7, 'f0');
    await finishOne();
    await finishOne();
    ra.clear(); // the warm-ups in flight (f3 to f10) finish without starting more
    for (let i = 0; i < 8; i++) await finishOne();
    expect(warmed).toEqual(names(1, 10));
    ra.onLookup(7, 'f14'); // a fresh start from f14: nothing behind it is warmed
    expect(warmed.slice(10)).toEqual(names(15, 19));
    expect(warmed.filter((n) => n === 'f15')).toHaveLength(1);
  });
});
