// randomHex: the worker's random names and cursors without the `crypto` module (host/random-hex.ts).
import { describe, expect, it } from 'vitest';

import { randomHex } from '../../src/host/random-hex.js';

describe('randomHex', () => {
  it('gives the asked number of bytes as lowercase hex', () => {
    for (const bytes of [1, 8, 12, 256])
      expect(randomHex(bytes)).toMatch(new RegExp(`^[0-9a-f]{${2 * bytes}}$`));
  });

  it('never repeats a value, across many refills of its pool', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i++) seen.add(randomHex(i % 2 === 0 ? 8 : 12));
    expect(seen.size).toBe(20_000);
  });

  it('refuses sizes it cannot give', () => {
    for (const bytes of [0, -1, 1.5, 257]) expect(() => randomHex(bytes)).toThrow(RangeError);
  });
});
