// Snapshots of a codebase tree: what the manifest records, that its id pins the content, and what a
// snapshot and a manifest refuse (symlinks out of the tree, special files, unsafe or unordered paths).
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  FsBlobStore,
  blobErrorReason,
  encodeManifest,
  parseManifest,
  readManifest,
  snapshotDirectory,
  type ManifestEntry,
} from '../src/index.js';
import { scratch, writeTree } from './helpers.js';

const reasonOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return 'accepted';
  } catch (err) {
    return blobErrorReason(err) ?? String(err);
  }
};
const asyncReasonOf = async (p: Promise<unknown>): Promise<string | undefined> =>
  p.then(
    () => 'accepted',
    (err: unknown) => blobErrorReason(err) ?? String(err),
  );
const manifestOf = (entries: readonly object[]): Buffer =>
  Buffer.from(JSON.stringify({ version: 1, entries }));
const D = 'a'.repeat(64);

describe('snapshotDirectory', () => {
  it('records every entry sorted, with modes, sizes, digests and link targets; the id pins the content', async () => {
    const store = await FsBlobStore.open(await scratch());
    const tree = await scratch();
    await writeTree(tree, {
      'README.md': '# hi\n',
      'bin/run': { mode: 0o755, content: '#!/bin/sh\n' },
      'src/a.ts': 'export {};\n',
      'src/empty': '',
      'src/link': { link: 'a.ts' },
      top: { link: 'src/../README.md' },
    });
    const snap = await snapshotDirectory(store, tree);
    expect(snap.files).toBe(4);
    expect(snap.bytes).toBe(5 + 10 + 11);
    expect(snap.manifest.entries.map((e) => `${e.type} ${e.path}`)).toEqual([
      'file README.md',
      'dir bin',
      'file bin/run',
      'dir src',
      'file src/a.ts',
      'file src/empty',
      'symlink src/link',
      'symlink top',
    ]);
    const run = snap.manifest.entries.find((e) => e.path === 'bin/run') as ManifestEntry & { mode: number };
    expect(run.mode).toBe(0o755);
    expect(snap.manifest.entries.find((e) => e.path === 'src/link')).toMatchObject({ target: 'a.ts' });
    expect(await readManifest(store, snap.snapshotId)).toEqual(snap.manifest);
    expect((await snapshotDirectory(store, tree)).snapshotId).toBe(snap.snapshotId);
    await writeTree(tree, { 'src/a.ts': 'export {}; \n' });
    expect((await snapshotDirectory(store, tree)).snapshotId).not.toBe(snap.snapshotId);
  });

  it.each([
    ['an absolute target', { evil: { link: '/etc' } }],
    ['a target climbing out', { 'sub/evil': { link: '../../outside' } }],
    ['a chain through another link', { here: { link: '.' }, evil: { link: 'here/..' } }],
    ['a chain of links climbing one step each', { 'd/up': { link: '..' }, evil: { link: 'd/up/d/up/..' } }],
  ])('refuses a symlink leading out of the tree: %s', async (_name, tree) => {
    const store = await FsBlobStore.open(await scratch());
    const dir = await scratch();
    await writeTree(dir, tree);
    expect(await asyncReasonOf(snapshotDirectory(store, dir))).toBe('symlink-escape');
  });

  it('refuses a FIFO and a socket, naming them', async () => {
    const store = await FsBlobStore.open(await scratch());
    const dir = await scratch();
    await writeTree(dir, { 'ok.txt': 'fine' });
    execFileSync('mkfifo', [join(dir, 'pipe')]);
    await expect(snapshotDirectory(store, dir)).rejects.toMatchObject({
      code: 'AF_PERMISSION_DENIED',
      details: { reason: 'special-file', path: 'pipe' },
    });
    const dir2 = await scratch();
    await mkdir(join(dir2, 'run'));
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(join(dir2, 'run', 'sock'), resolve));
    try {
      await expect(snapshotDirectory(store, dir2)).rejects.toMatchObject({
        details: { reason: 'special-file', path: 'run/sock' },
      });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('parseManifest', () => {
  it('reads back what encodeManifest wrote', () => {
    const manifest = {
      version: 1 as const,
      entries: [
        { path: 'a', type: 'dir' as const, mode: 0o755 },
        { path: 'a/b', type: 'file' as const, mode: 0o644, size: 3, digest: D },
        { path: 'a/c', type: 'symlink' as const, target: 'b' },
      ] as ManifestEntry[],
    };
    expect(parseManifest(encodeManifest(manifest))).toEqual(manifest);
  });

  it.each(['../x', '/etc/passwd', 'a//b', 'a/./b', 'a/../b', '', 'x\0y', `${'n'.repeat(256)}`])(
    'refuses the path %j',
    (path) => {
      expect(reasonOf(() => parseManifest(manifestOf([{ path, type: 'dir', mode: 0o755 }])))).toBe(
        'unsafe-path',
      );
    },
  );

  it('refuses unsorted and repeated entries, and an entry whose parent is not a directory', () => {
    const file = (path: string): object => ({ path, type: 'file', mode: 0o644, size: 0, digest: D });
    expect(reasonOf(() => parseManifest(manifestOf([file('b'), file('a')])))).toBe('invalid-manifest');
    expect(reasonOf(() => parseManifest(manifestOf([file('a'), file('a')])))).toBe('invalid-manifest');
    expect(reasonOf(() => parseManifest(manifestOf([file('a/b')])))).toBe('invalid-manifest');
    expect(
      reasonOf(() => parseManifest(manifestOf([{ path: 'l', type: 'symlink', target: 'd' }, file('l/x')]))),
    ).toBe('invalid-manifest');
  });

  it('refuses setuid, setgid and sticky modes, bad digests and sizes, and other versions', () => {
    expect(
      reasonOf(() =>
        parseManifest(manifestOf([{ path: 'a', type: 'file', mode: 0o4755, size: 0, digest: D }])),
      ),
    ).toBe('invalid-manifest');
    expect(
      reasonOf(() =>
        parseManifest(manifestOf([{ path: 'a', type: 'file', mode: 0o644, size: -1, digest: D }])),
      ),
    ).toBe('invalid-manifest');
    expect(
      reasonOf(() =>
        parseManifest(manifestOf([{ path: 'a', type: 'file', mode: 0o644, size: 0, digest: '../x' }])),
      ),
    ).toBe('invalid-digest');
    expect(reasonOf(() => parseManifest(Buffer.from('{"version":2,"entries":[]}')))).toBe('invalid-manifest');
    expect(reasonOf(() => parseManifest(Buffer.from('not json')))).toBe('invalid-manifest');
  });
});
