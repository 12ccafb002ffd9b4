// Readers that keep nothing a store served until its digest was checked: a small blob (a manifest) read
// whole, and a blob copied into a file the caller renames into place only after this returns. They hash
// what they read themselves rather than rely on the store's stream: a store is the node's to distrust
// (a shared directory others write, or a server across the network), and its implementation with it.
import { constants } from 'node:fs';
import { open, unlink } from 'node:fs/promises';
import { sha256, type Digest } from './digest.js';
import { blobError } from './errors.js';
import type { BlobReader } from './store.js';

/** The whole blob, verified; more than `maxBytes` is `too-large`. */
export async function readBlob(store: BlobReader, digest: Digest, maxBytes: number): Promise<Buffer> {
  const stream = await store.get(digest);
  const chunks: Buffer[] = [];
  const hash = sha256();
  let size = 0;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      size += chunk.byteLength;
      if (size > maxBytes) {
        throw blobError('too-large', `blob ${digest} is larger than ${maxBytes} bytes`, { digest, maxBytes });
      }
      hash.update(chunk);
      chunks.push(chunk);
    }
  } finally {
    stream.destroy();
  }
  checkDigest(digest, hash.digest('hex'));
  return Buffer.concat(chunks);
}

/**
 * Writes the blob to a new file `dest` (mode 0600), verified and exactly `size` bytes long when given,
 * fsynced unless `fsync` is false; on any failure `dest` is removed.
 */
export async function copyBlobToFile(
  store: BlobReader,
  digest: Digest,
  dest: string,
  options: { readonly size?: number; readonly fsync?: boolean } = {},
): Promise<void> {
  const fh = await open(dest, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    const stream = await store.get(digest);
    const hash = sha256();
    let size = 0;
    try {
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        size += chunk.byteLength;
        if (options.size !== undefined && size > options.size) {
          throw blobError('too-large', `blob ${digest} is larger than the ${options.size} bytes listed`, {
            digest,
          });
        }
        hash.update(chunk);
        let offset = 0;
        while (offset < chunk.byteLength) {
          offset += (await fh.write(chunk, offset, chunk.byteLength - offset)).bytesWritten;
        }
      }
    } finally {
      stream.destroy();
    }
    if (options.size !== undefined && size !== options.size) {
      throw blobError('digest-mismatch', `blob ${digest} has ${size} bytes, not the ${options.size} listed`, {
        digest,
      });
    }
    checkDigest(digest, hash.digest('hex'));
    if (options.fsync !== false) await fh.sync();
  } catch (err) {
    await fh.close().catch(() => undefined);
    await unlink(dest).catch(() => undefined);
    throw err;
  }
  await fh.close();
}

function checkDigest(digest: Digest, actual: string): void {
  if (actual !== digest) {
    throw blobError('digest-mismatch', `blob ${digest} holds bytes that hash to ${actual}`, {
      digest,
      actual,
    });
  }
}
