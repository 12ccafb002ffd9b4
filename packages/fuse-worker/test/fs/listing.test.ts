// Listing: a directory's served entries kept as columns, handed out as the binding's entry objects.
import { constants } from 'node:fs';
import { describe, expect, it } from 'vitest';

import { ListingBuilder } from '../../src/fs/listing.js';

describe('Listing', () => {
  it('gives back each entry with its d_ino, type bits and the next offset, from any offset', () => {
    const b = new ListingBuilder();
    b.add('.', 7, constants.S_IFDIR);
    b.add('..', 1, constants.S_IFDIR);
    b.add('a.txt', 2 ** 32 - 5, constants.S_IFREG);
    b.add('link', 2 ** 53 - 1, constants.S_IFLNK);
    b.add('fifo', 12, constants.S_IFIFO);
    b.add('odd', 13, 0);
    const l = b.build();
    expect(l.length).toBe(6);
    expect(l.names).toEqual(['.', '..', 'a.txt', 'link', 'fifo', 'odd']);
    expect(l.entries(0)).toEqual([
      { name: '.', ino: 7, mode: constants.S_IFDIR, nextOffset: 1 },
      { name: '..', ino: 1, mode: constants.S_IFDIR, nextOffset: 2 },
      { name: 'a.txt', ino: 2 ** 32 - 5, mode: constants.S_IFREG, nextOffset: 3 },
      { name: 'link', ino: 2 ** 53 - 1, mode: constants.S_IFLNK, nextOffset: 4 },
      { name: 'fifo', ino: 12, mode: constants.S_IFIFO, nextOffset: 5 },
      { name: 'odd', ino: 13, mode: 0, nextOffset: 6 },
    ]);
    expect(l.entries(3, 5).map((e) => e.nextOffset)).toEqual([4, 5]);
    expect(l.entries(6)).toEqual([]);
    expect(l.entries(9, 20)).toEqual([]);
  });

  it('keeps every type of a directory larger than one call can take', () => {
    const b = new ListingBuilder();
    const n = 200_000;
    for (let i = 0; i < n; i++) b.add(`f${i}`, i + 1, i % 3 === 0 ? constants.S_IFDIR : constants.S_IFREG);
    const l = b.build();
    expect(l.length).toBe(n);
    expect(l.modeAt(n - 1)).toBe((n - 1) % 3 === 0 ? constants.S_IFDIR : constants.S_IFREG);
    expect(l.entry(123_456)).toEqual({
      name: 'f123456',
      ino: 123_457,
      mode: constants.S_IFDIR,
      nextOffset: 123_457,
    });
  });
});
