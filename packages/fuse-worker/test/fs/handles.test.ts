// The bound of the worker's host fds (fs/handles.ts): wide enough for a tree just written, never more than a
// quarter of the process's fd limit, and the least recently used unpinned handle is the one closed.
import { describe, expect, it } from 'vitest';
import { HandleCache, MAX_OPEN_HANDLES, handleBound, softNofile } from '../../src/fs/handles.js';
import type { HostFile } from '../../src/host/raw-file.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max open files            1024                 524288               files
`;

/** A handle that records its close. */
function handle(closed: number[], fd: number): HostFile {
  return { fd, close: () => (closed.push(fd), Promise.resolve()) } as unknown as HostFile;
}

describe('HandleCache bound', () => {
  it('is a quarter of the soft fd limit, at most MAX_OPEN_HANDLES', () => {
    expect(softNofile(LIMITS)).toBe(1024);
    expect(handleBound(1024)).toBe(256);
    expect(handleBound(1_048_576)).toBe(MAX_OPEN_HANDLES);
    expect(handleBound(100)).toBe(64);
    expect(softNofile('Max open files            unlimited            unlimited            files\n')).toBe(
      undefined,
    );
    expect(handleBound(undefined)).toBe(MAX_OPEN_HANDLES);
  });

  it('closes the least recently used unpinned handle past the bound, telling the binding first', () => {
    const closed: number[] = [];
    const told: number[] = [];
    const cache = new HandleCache(2);
    cache.beforeClose = (ino) => told.push(ino);
    cache.set(1, handle(closed, 11), false);
    cache.pin(1);
    cache.set(2, handle(closed, 12), false);
    cache.set(3, handle(closed, 13), false);
    expect(closed).toEqual([12]);
    expect(told).toEqual([2]);
    cache.narrow(1);
    expect(cache.bound).toBe(1);
  });
});
