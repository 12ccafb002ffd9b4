// The per-path memo: bounded, clearable, and not flushed by a scan of never-repeated paths.
import { describe, expect, it } from 'vitest';
import { BoundedCache } from '../../src/permissions/cache.js';

describe('BoundedCache', () => {
  it('returns what was stored and nothing else', () => {
    const cache = new BoundedCache<number>({ capacity: 10 });
    cache.set('/a', 1);
    expect(cache.get('/a')).toBe(1);
    expect(cache.get('/b')).toBeUndefined();
    expect(cache.get('/a/')).toBeUndefined();
  });

  it('never holds more than its capacity, and clear() empties it', () => {
    const cache = new BoundedCache<number>({ capacity: 100 });
    for (let i = 0; i < 1000; i++) {
      cache.set(`/p${i}`, i);
      expect(cache.size).toBeLessThanOrEqual(100);
    }
    cache.clear();
    expect(cache.size).toBe(0);
    expect(cache.get('/p999')).toBeUndefined();
  });

  it('holds at most maxKeyChars characters of keys, and never a key longer than PATH_MAX', () => {
    const cache = new BoundedCache<number>({ capacity: 1000, maxKeyChars: 10_000 });
    const long = `/${'d'.repeat(255)}`;
    let held = 0;
    for (let i = 0; i < 200; i++) {
      cache.set(`${long}/${i}`, i);
      held = Math.max(held, cache.size);
    }
    // 10,000 characters of ~260-character keys: at most 38 at a time.
    expect(held).toBeLessThanOrEqual(38);
    expect(cache.get(`${long}/199`)).toBe(199);
    const deep = Array<string>(20).fill('d'.repeat(255)).join('/');
    cache.set(deep, 1);
    expect(cache.get(deep)).toBeUndefined();
  });

  it('capacity 0 disables caching', () => {
    const cache = new BoundedCache<number>({ capacity: 0 });
    cache.set('/a', 1);
    expect(cache.get('/a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('during a scan admits only a sample of misses, yet a working set still ends up cached', () => {
    const cache = new BoundedCache<number>({ capacity: 100_000 });
    for (let i = 0; i < 50_000; i++) if (cache.get(`/scan/${i}`) === undefined) cache.set(`/scan/${i}`, i);
    expect(cache.size).toBeLessThan(10_000);

    const hot = Array.from({ length: 1000 }, (_, i) => `/hot/${i}`);
    let hits = 0;
    for (let round = 0; round < 40; round++) {
      for (const key of hot) {
        if (cache.get(key) !== undefined) hits++;
        else cache.set(key, round);
      }
    }
    expect(hits / (40 * hot.length)).toBeGreaterThan(0.8);
    for (const key of hot) expect(cache.get(key)).toBeDefined();
  });
});
