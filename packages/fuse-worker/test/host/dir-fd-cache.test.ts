// host/dir-fd-cache.ts: the directory fds kept open are bounded in number and in the characters of their
// keys (paths), and an fd is closed only once evicted and released.
import { describe, expect, it } from 'vitest';
import { DirFdCache } from '../../src/host/dir-fd-cache.js';
import type { DirHandle } from '../../src/host/dir-fd-cache.js';

function handle(closed: number[], fd: number): DirHandle {
  return {
    fd,
    close: () => {
      closed.push(fd);
      return Promise.resolve();
    },
  };
}

describe('DirFdCache', () => {
  it('evicts the least recently used entries past its capacity', async () => {
    const closed: number[] = [];
    const cache = new DirFdCache({ capacity: 2, maxAgeMs: Infinity });
    for (const [i, rel] of ['a', 'b', 'c'].entries())
      await cache.release(cache.insert(rel, handle(closed, i)));
    expect(cache.size).toBe(2);
    expect(cache.has('a')).toBe(false);
    expect(closed).toEqual([0]);
  });

  it('holds at most maxKeyChars characters of paths, keeping the newest entry', async () => {
    const closed: number[] = [];
    const cache = new DirFdCache({ capacity: 256, maxAgeMs: Infinity, maxKeyChars: 3_000 });
    const name = 'd'.repeat(255);
    let rel = '';
    for (let level = 0; level < 30; level++) {
      rel = rel === '' ? name : `${rel}/${name}`;
      const entry = cache.insert(rel, handle(closed, level));
      // The deepest path (7,680 characters) is over the budget alone: it stays while it is the newest.
      expect(cache.has(rel)).toBe(true);
      await cache.release(entry);
    }
    expect(cache.size).toBe(1);
    expect(closed).toHaveLength(29);
    const held = cache.acquire(rel);
    expect(held).toBeDefined();
    cache.insert('x', handle(closed, 99));
    // Evicted while held: closed at its release, not before.
    expect(cache.has(rel)).toBe(false);
    expect(closed).not.toContain(29);
    await cache.release(held!);
    expect(closed).toContain(29);
    await cache.clear();
  });

  it('releaseNow closes an fd evicted while held at its last release, and a cached one never', () => {
    const closed: number[] = [];
    const cache = new DirFdCache({ capacity: 1, maxAgeMs: Infinity });
    cache.releaseNow(cache.insert('a', handle(closed, 1)));
    const first = cache.acquire('a');
    const second = cache.acquire('a');
    expect(closed).toEqual([]);
    cache.releaseNow(cache.insert('b', handle(closed, 2))); // evicts 'a', held twice
    cache.releaseNow(first!);
    expect(closed).toEqual([]);
    cache.releaseNow(second!);
    expect(closed).toEqual([1]);
    expect(cache.has('b')).toBe(true);
  });
});
