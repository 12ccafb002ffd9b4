// The filesystem store: names are the content's SHA-256, a put is all or nothing, a get refuses bytes
// that do not match their name, and a sweep deletes only unreferenced blobs past the grace period.
import { createHash } from 'node:crypto';
import { chmod, mkdir, readdir, stat, symlink, unlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FsBlobStore, blobErrorReason, copyBlobToFile, readBlob, type Digest } from '../src/index.js';
import { chunksOf, scratch } from './helpers.js';

const sha = (s: string): Digest => createHash('sha256').update(s).digest('hex') as Digest;
const blobPath = (root: string, d: string): string => join(root, 'sha256', d.slice(0, 2), d);
const reasonOf = async (p: Promise<unknown>): Promise<string | undefined> =>
  p.then(
    () => 'resolved',
    (err: unknown) => blobErrorReason(err) ?? String(err),
  );

async function drain(stream: AsyncIterable<Buffer>): Promise<string> {
  let s = '';
  for await (const c of stream) s += c.toString();
  return s;
}

describe('FsBlobStore', () => {
  it('names a blob by its SHA-256 and gives its bytes back', async () => {
    const store = await FsBlobStore.open(await scratch());
    const { digest, size } = await store.put(chunksOf(['hello ', 'world']));
    expect(digest).toBe(sha('hello world'));
    expect(size).toBe(11);
    expect(await store.has(digest)).toBe(true);
    expect(await store.size(digest)).toBe(11);
    expect(await drain((await store.get(digest)) as AsyncIterable<Buffer>)).toBe('hello world');
    expect((await store.put(chunksOf(['hello world']))).digest).toBe(digest);
    const listed: string[] = [];
    for await (const d of store.list()) listed.push(d);
    expect(listed).toEqual([digest]);
    expect((await stat(blobPath(store.root, digest))).mode & 0o777).toBe(0o444);
  });

  it('keeps nothing of a put whose content is not the expected digest', async () => {
    const root = await scratch();
    const store = await FsBlobStore.open(root);
    expect(await reasonOf(store.put(chunksOf(['abc']), { expected: sha('abd') }))).toBe('digest-mismatch');
    expect(await store.has(sha('abc'))).toBe(false);
    expect(await store.has(sha('abd'))).toBe(false);
    expect(await readdir(join(root, 'tmp'))).toEqual([]);
  });

  it('never shows a partial put: not while it runs, not after it fails', async () => {
    const root = await scratch();
    const store = await FsBlobStore.open(root);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const seen: boolean[] = [];
    async function* slow(): AsyncIterable<Uint8Array> {
      yield Buffer.from('first half ');
      seen.push(await store.has(sha('first half second half')), await store.has(sha('first half ')));
      await gate;
      throw new Error('client went away');
    }
    const put = store.put(slow());
    release();
    await expect(put).rejects.toThrow('client went away');
    expect(seen).toEqual([false, false]);
    const listed: string[] = [];
    for await (const d of store.list()) listed.push(d);
    expect(listed).toEqual([]);
    expect(await readdir(join(root, 'tmp'))).toEqual([]);
  });

  it('refuses more bytes than maxBytes and keeps none', async () => {
    const store = await FsBlobStore.open(await scratch());
    expect(await reasonOf(store.put(chunksOf(['12345', '6']), { maxBytes: 5 }))).toBe('too-large');
    expect(await store.has(sha('123456'))).toBe(false);
  });

  it('refuses a blob whose bytes on disk no longer match its name, on every reader', async () => {
    const root = await scratch();
    const store = await FsBlobStore.open(root);
    const { digest } = await store.put(chunksOf(['the real content']));
    const path = blobPath(root, digest);
    await chmod(path, 0o644);
    await writeFile(path, 'tampered content');
    await expect(drain((await store.get(digest)) as AsyncIterable<Buffer>)).rejects.toMatchObject({
      code: 'AF_PROTOCOL',
      details: { reason: 'digest-mismatch' },
    });
    expect(await reasonOf(readBlob(store, digest, 1024))).toBe('digest-mismatch');
    const dest = join(await scratch(), 'copy');
    expect(await reasonOf(copyBlobToFile(store, digest, dest))).toBe('digest-mismatch');
    await expect(stat(dest)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses a blob that is a symlink, a missing blob and a malformed digest', async () => {
    const root = await scratch();
    const store = await FsBlobStore.open(root);
    const outside = join(await scratch(), 'secret');
    await writeFile(outside, 'host secret');
    const d = sha('host secret');
    await mkdir(join(root, 'sha256', d.slice(0, 2)), { recursive: true });
    await symlink(outside, blobPath(root, d));
    expect(await reasonOf(store.get(d))).toBe('digest-mismatch');
    expect(await reasonOf(store.get(sha('never stored')))).toBe('not-found');
    expect(await reasonOf(store.get('../../etc/passwd' as Digest))).toBe('invalid-digest');
    expect(await reasonOf(store.has('A'.repeat(64) as Digest))).toBe('invalid-digest');
  });

  it('sweeps unreferenced blobs older than the grace period only', async () => {
    const root = await scratch();
    const store = await FsBlobStore.open(root);
    const kept = (await store.put(chunksOf(['referenced']))).digest;
    const old = (await store.put(chunksOf(['old and unreferenced']))).digest;
    const young = (await store.put(chunksOf(['young and unreferenced']))).digest;
    const hourAgo = new Date(Date.now() - 2 * 3600_000);
    for (const d of [kept, old]) await utimes(blobPath(root, d), hourAgo, hourAgo);
    expect(await store.sweep(new Set([kept]))).toEqual([old]);
    expect(await store.has(kept)).toBe(true);
    expect(await store.has(old)).toBe(false);
    expect(await store.has(young)).toBe(true);
    await unlink(blobPath(root, young));
  });
});
