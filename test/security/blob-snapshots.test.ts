// A blob store the node does not control (a shared directory every node and every replica writes) must
// not be able to make the node agent, which is root, write outside its cache or hand a sandbox other
// bytes than the snapshot id names. Attacks: a manifest whose path is `../…` or absolute, a symlink
// pointing out of the tree (directly or through another link), a file reached through a symlink, and a
// blob whose bytes were replaced in the store. Defences: parseManifest's path, parent and symlink checks
// (packages/blobs/src/manifest.ts, symlinks.ts), and digest verification on every read
// (fs-store.ts verifier, read.ts), before a file is renamed into the node's cache.
import { createHash } from 'node:crypto';
import { chmod, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FsBlobStore, NodeBlobCache, blobErrorReason, readBlob, type Digest } from '@agentfense/blobs';

const CONTENT = 'written by the attacker\n';
const DIGEST = createHash('sha256').update(CONTENT).digest('hex');

let dir: string;
let store: FsBlobStore;
let cache: NodeBlobCache;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'af-blob-attack-'));
  store = await FsBlobStore.open(join(dir, 'store'));
  await store.put([Buffer.from(CONTENT)]);
  cache = await NodeBlobCache.open({ root: join(dir, 'node', 'cache'), store, maxBytes: 1 << 20 });
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A hostile manifest put in the store; its digest is the snapshot id handed to the node. */
async function hostile(entries: readonly object[]): Promise<Digest> {
  return (await store.put([Buffer.from(JSON.stringify({ version: 1, entries }))])).digest;
}

const file = (path: string): object => ({
  path,
  type: 'file',
  mode: 0o644,
  size: CONTENT.length,
  digest: DIGEST,
});

async function refusal(id: Digest): Promise<string | undefined> {
  return cache.materialise(id).then(
    (lease) => {
      lease.release();
      return 'materialised';
    },
    (err: unknown) => blobErrorReason(err) ?? String(err),
  );
}

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

describe('a hostile manifest cannot write outside the node cache', () => {
  it('refuses a path climbing out with ..', async () => {
    // From <dir>/node/cache/tmp/<build>/, four steps up is <dir>.
    expect(await refusal(await hostile([file('../../../../escaped')]))).toBe('unsafe-path');
    expect(await exists(join(dir, 'escaped'))).toBe(false);
    expect(await exists(join(dir, 'node', 'cache', 'escaped'))).toBe(false);
  });

  it('refuses an absolute path', async () => {
    const target = join(dir, 'absolute-escaped');
    expect(await refusal(await hostile([file(target.slice(0))]))).toBe('unsafe-path');
    expect(await exists(target)).toBe(false);
  });

  it('refuses a file reached through a symlink to a host directory', async () => {
    const id = await hostile([{ path: 'l', type: 'symlink', target: dir }, file('l/through-link')]);
    expect(await refusal(id)).toBe('invalid-manifest');
    expect(await exists(join(dir, 'through-link'))).toBe(false);
  });

  it.each([
    ['absolute', [{ path: 'etc', type: 'symlink', target: '/etc' }]],
    ['climbing', [{ path: 'up', type: 'symlink', target: '../../../..' }]],
    [
      'through another link',
      [
        { path: 'here', type: 'symlink', target: '.' },
        { path: 'out', type: 'symlink', target: 'here/../x' },
      ],
    ],
  ])('refuses a symlink pointing out of the tree (%s)', async (_kind, entries) => {
    expect(await refusal(await hostile(entries))).toBe('symlink-escape');
    expect(await readdir(join(dir, 'node', 'cache', 'snapshots'))).toEqual([]);
  });
});

describe('a blob whose bytes do not match its digest is never served', () => {
  it('a replaced file blob: refused by get, by readBlob and by materialise; nothing of it cached', async () => {
    const id = await hostile([file('victim.txt')]);
    const path = join(dir, 'store', 'sha256', DIGEST.slice(0, 2), DIGEST);
    await chmod(path, 0o644);
    await writeFile(path, 'substituted bytes, same length!\n'.slice(0, CONTENT.length));
    expect(await readBlob(store, DIGEST as Digest, 1024).catch((err: unknown) => blobErrorReason(err))).toBe(
      'digest-mismatch',
    );
    expect(await refusal(id)).toBe('digest-mismatch');
    expect(await readdir(join(dir, 'node', 'cache', 'snapshots'))).toEqual([]);
    expect(await readdir(join(dir, 'node', 'cache', 'objects'))).toEqual([]);
    expect(await readdir(join(dir, 'node', 'cache', 'tmp'))).toEqual([]);
  });

  it('a replaced manifest: refused before any of it is read as a manifest', async () => {
    const id = await hostile([file('fine.txt')]);
    const path = join(dir, 'store', 'sha256', id.slice(0, 2), id);
    await chmod(path, 0o644);
    await writeFile(path, JSON.stringify({ version: 1, entries: [file('other.txt')] }));
    expect(await refusal(id)).toBe('digest-mismatch');
    // The store's own bytes are what the attacker wrote; the node never materialised them.
    expect(JSON.parse(await readFile(path, 'utf8'))).toMatchObject({ version: 1 });
    expect(await readdir(join(dir, 'node', 'cache', 'snapshots'))).toEqual([]);
  });
});
