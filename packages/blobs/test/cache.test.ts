// The node cache: a snapshot materialised as the tree it was taken from, built once however many ask
// at once, its files links to verified cache objects, and the least recently used unleased snapshots
// evicted past the bound.
import { chmod, readFile, readdir, readlink, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  FsBlobStore,
  NodeBlobCache,
  blobErrorReason,
  snapshotDirectory,
  type BlobStore,
  type Digest,
} from '../src/index.js';
import { scratch, writeTree } from './helpers.js';

/** A store that counts gets (how often the cache went to the shared store). */
function counting(store: BlobStore): { store: BlobStore; gets: Digest[] } {
  const gets: Digest[] = [];
  const wrapped: BlobStore = {
    put: (s, o) => store.put(s, o),
    putFile: (p, o) => store.putFile(p, o),
    has: (d) => store.has(d),
    size: (d) => store.size(d),
    list: () => store.list(),
    sweep: (r, o) => store.sweep(r, o),
    get: async (d): Promise<Readable> => {
      gets.push(d);
      return store.get(d);
    },
  };
  return { store: wrapped, gets };
}

async function snapshotOf(store: BlobStore, tree: Parameters<typeof writeTree>[1]): Promise<Digest> {
  const dir = await scratch();
  await writeTree(dir, tree);
  return (await snapshotDirectory(store, dir)).snapshotId;
}

describe('NodeBlobCache', () => {
  it('materialises the tree the snapshot was taken of, files linked to cache objects', async () => {
    const shared = await FsBlobStore.open(await scratch());
    const id = await snapshotOf(shared, {
      'README.md': 'read me\n',
      'bin/run': { mode: 0o755, content: '#!/bin/sh\necho hi\n' },
      'src/a.ts': 'export const a = 1;\n',
      'src/same.ts': 'export const a = 1;\n',
      'src/link': { link: 'a.ts' },
    });
    const cache = await NodeBlobCache.open({ root: await scratch(), store: shared, maxBytes: 1 << 20 });
    const lease = await cache.materialise(id);
    expect(await readFile(join(lease.path, 'README.md'), 'utf8')).toBe('read me\n');
    expect(await readFile(join(lease.path, 'src/same.ts'), 'utf8')).toBe('export const a = 1;\n');
    expect((await stat(join(lease.path, 'bin/run'))).mode & 0o777).toBe(0o755);
    expect((await stat(join(lease.path, 'README.md'))).mode & 0o777).toBe(0o644);
    expect(await readlink(join(lease.path, 'src/link'))).toBe('a.ts');
    // One object for both identical files, linked from the tree.
    expect((await stat(join(lease.path, 'src/a.ts'))).ino).toBe(
      (await stat(join(lease.path, 'src/same.ts'))).ino,
    );
    expect((await stat(join(lease.path, 'src/a.ts'))).nlink).toBe(3);
    const again = await cache.materialise(id);
    expect(again.path).toBe(lease.path);
    expect(cache.stats()).toMatchObject({ builds: 1, snapshots: 1, leased: 1 });
    lease.release();
    again.release();
    expect(cache.stats().leased).toBe(0);
  });

  it('does the work once for concurrent materialisations of one snapshot', async () => {
    const shared = await FsBlobStore.open(await scratch());
    const files: Record<string, string> = {};
    for (let i = 0; i < 50; i++) files[`f${i}.txt`] = `file ${i}\n`;
    const id = await snapshotOf(shared, files);
    const { store, gets } = counting(shared);
    const cache = await NodeBlobCache.open({ root: await scratch(), store, maxBytes: 1 << 20 });
    const leases = await Promise.all(Array.from({ length: 6 }, () => cache.materialise(id)));
    expect(new Set(leases.map((l) => l.path)).size).toBe(1);
    expect(cache.stats()).toMatchObject({ builds: 1, leased: 1 });
    // The manifest once and each file's blob once.
    expect(gets.length).toBe(51);
    expect(new Set(gets).size).toBe(51);
    expect((await readdir(leases[0]!.path)).length).toBe(50);
    for (const l of leases) l.release();
  });

  it('evicts the least recently used snapshot no lease holds, and the objects only it linked', async () => {
    const shared = await FsBlobStore.open(await scratch());
    const big = (c: string): string => c.repeat(1000);
    const a = await snapshotOf(shared, { x: big('a'), common: 'shared\n' });
    const b = await snapshotOf(shared, { x: big('b'), common: 'shared\n' });
    const c = await snapshotOf(shared, { x: big('c'), common: 'shared\n' });
    const root = await scratch();
    // Room for two snapshots' objects, not three.
    const cache = await NodeBlobCache.open({ root, store: shared, maxBytes: 2 * 1000 + 7 + 500 });
    const la = await cache.materialise(a);
    const lb = await cache.materialise(b);
    lb.release();
    await new Promise((r) => setTimeout(r, 20));
    la.release(); // a is now the more recently used
    const lc = await cache.materialise(c);
    const snapshots = await readdir(join(root, 'snapshots'));
    expect(snapshots.sort()).toEqual([a, c].sort());
    expect(cache.stats().objectBytes).toBe(2 * 1000 + 7);
    expect((await readdir(join(root, 'objects'))).length).toBe(3);
    // Leased snapshots stay even past the bound.
    const la2 = await cache.materialise(a);
    const lb2 = await cache.materialise(b);
    expect((await readdir(join(root, 'snapshots'))).sort()).toEqual([a, b, c].sort());
    expect(cache.stats().objectBytes).toBe(3 * 1000 + 7);
    for (const lease of [lc, la2, lb2]) {
      lease.release();
      await new Promise((r) => setTimeout(r, 20));
    }
    // Released, c is the least recently used.
    expect(await cache.evict()).toEqual([c]);
    expect((await readdir(join(root, 'snapshots'))).sort()).toEqual([a, b].sort());
  });

  it('refuses a snapshot whose blob in the store was altered, keeping nothing of it', async () => {
    const storeRoot = await scratch();
    const shared = await FsBlobStore.open(storeRoot);
    const id = await snapshotOf(shared, { 'ok.txt': 'fine\n', 'victim.txt': 'original\n' });
    const { createHash } = await import('node:crypto');
    const victim = createHash('sha256').update('original\n').digest('hex');
    const path = join(storeRoot, 'sha256', victim.slice(0, 2), victim);
    await chmod(path, 0o644);
    await writeFile(path, 'replaced\n');
    const root = await scratch();
    const cache = await NodeBlobCache.open({ root, store: shared, maxBytes: 1 << 20 });
    await expect(cache.materialise(id)).rejects.toSatisfy(
      (err) => blobErrorReason(err) === 'digest-mismatch',
    );
    expect(await readdir(join(root, 'snapshots'))).toEqual([]);
    expect(await readdir(join(root, 'tmp'))).toEqual([]);
    for (const name of await readdir(join(root, 'objects'))) expect(name.startsWith(victim)).toBe(false);
    expect(cache.stats().leased).toBe(0);
  });

  it('drops what an interrupted build left, keeps finished snapshots across a restart, not a reboot', async () => {
    const shared = await FsBlobStore.open(await scratch());
    const id = await snapshotOf(shared, { 'a.txt': 'a\n' });
    const root = await scratch();
    const first = await NodeBlobCache.open({ root, store: shared, maxBytes: 1 << 20 });
    (await first.materialise(id)).release();
    await writeFile(join(root, 'tmp', 'half-built.tree'), '');
    const second = await NodeBlobCache.open({ root, store: shared, maxBytes: 1 << 20 });
    expect(await readdir(join(root, 'tmp'))).toEqual([]);
    expect(second.stats()).toMatchObject({ snapshots: 1, objectBytes: 2 });
    const lease = await second.materialise(id);
    expect(second.stats().builds).toBe(0);
    expect(await readFile(join(lease.path, 'a.txt'), 'utf8')).toBe('a\n');
    lease.release();
    // After a host restart (another boot id) unsynced objects may be torn: everything is dropped.
    await writeFile(join(root, 'boot-id'), 'another boot\n');
    const third = await NodeBlobCache.open({ root, store: shared, maxBytes: 1 << 20 });
    expect(third.stats()).toMatchObject({ snapshots: 0, objectBytes: 0 });
    expect(await readdir(join(root, 'snapshots'))).toEqual([]);
    (await third.materialise(id)).release();
    expect(third.stats().builds).toBe(1);
  });
});
