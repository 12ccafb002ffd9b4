// Taking a snapshot of a codebase directory: walk it without following any symlink, put every file's
// bytes in the store, and put the manifest last, so a snapshot id never names a manifest whose blobs are
// missing. A device, FIFO or socket refuses the snapshot (a FIFO would block the reader, a device would
// read host hardware), as does a symlink leading out of the tree.
import { lstat, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Digest } from './digest.js';
import { blobError } from './errors.js';
import {
  MANIFEST_VERSION,
  MAX_ENTRIES,
  MAX_MANIFEST_BYTES,
  encodeManifest,
  parseManifest,
  sortEntries,
  validateManifest,
  type Manifest,
  type ManifestEntry,
} from './manifest.js';
import { readBlob } from './read.js';
import type { BlobReader, BlobStore } from './store.js';

export interface SnapshotResult {
  /** The manifest's digest. */
  readonly snapshotId: Digest;
  readonly manifest: Manifest;
  readonly files: number;
  /** Sum of the files' sizes. */
  readonly bytes: number;
}

/**
 * Snapshots the tree at `dir` into `store`. The tree should not change meanwhile: a directory replaced
 * while it is read refuses the snapshot, a file is read through O_NOFOLLOW, and what a file holds when
 * read is what its digest says.
 */
export async function snapshotDirectory(store: BlobStore, dir: string): Promise<SnapshotResult> {
  const entries: ManifestEntry[] = [];
  let bytes = 0;
  let files = 0;
  const visit = async (rel: string): Promise<void> => {
    const abs = rel === '' ? dir : join(dir, rel);
    const before = await lstat(abs);
    const names = (await readdir(abs)).sort();
    const after = await lstat(abs);
    // readdir follows a symlink: a directory swapped for one between the two lstat calls is refused.
    if (!after.isDirectory() || after.ino !== before.ino || after.dev !== before.dev) {
      throw blobError('symlink-escape', `${JSON.stringify(rel || '.')} changed while it was read`, {
        path: rel,
      });
    }
    for (const name of names) {
      const path = rel === '' ? name : `${rel}/${name}`;
      if (entries.length >= MAX_ENTRIES) {
        throw blobError('invalid-manifest', `more than ${MAX_ENTRIES} entries`, { path });
      }
      const st = await lstat(join(dir, path));
      if (st.isSymbolicLink()) {
        entries.push({ path, type: 'symlink', target: await readlink(join(dir, path)) });
      } else if (st.isDirectory()) {
        entries.push({ path, type: 'dir', mode: st.mode & 0o777 });
        await visit(path);
      } else if (st.isFile()) {
        const { digest, size } = await store.putFile(join(dir, path));
        entries.push({ path, type: 'file', mode: st.mode & 0o777, size, digest });
        bytes += size;
        files += 1;
      } else {
        throw blobError('special-file', `${JSON.stringify(path)} is not a file, directory or symlink`, {
          path,
        });
      }
    }
  };
  if (!(await lstat(dir)).isDirectory()) {
    throw blobError('special-file', `${dir} is not a directory`, { path: '.' });
  }
  await visit('');
  const manifest = validateManifest({ version: MANIFEST_VERSION, entries: sortEntries(entries) });
  const { digest } = await store.put([encodeManifest(manifest)]);
  return { snapshotId: digest, manifest, files, bytes };
}

/** The manifest of snapshot `snapshotId`, verified against the id and checked (parseManifest). */
export async function readManifest(store: BlobReader, snapshotId: Digest): Promise<Manifest> {
  return parseManifest(await readBlob(store, snapshotId, MAX_MANIFEST_BYTES));
}

/** Every digest a snapshot needs: its manifest and its files' blobs (what a sweep must keep). */
export function snapshotDigests(snapshotId: Digest, manifest: Manifest): Set<Digest> {
  const digests = new Set<Digest>([snapshotId]);
  for (const e of manifest.entries) if (e.type === 'file') digests.add(e.digest);
  return digests;
}
