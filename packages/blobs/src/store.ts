// What every blob store offers. Blobs are immutable and named by their SHA-256; a store verifies the name
// on put (the bytes it keeps hash to the name it gives) and on get (bytes that do not hash to the name
// asked for are an error, never data), so a store the reader does not trust can withhold but not
// substitute content.
import type { Readable } from 'node:stream';
import type { Digest } from './digest.js';

export interface PutOptions {
  /** The digest the caller expects: a mismatch is `digest-mismatch` and nothing is kept. */
  readonly expected?: Digest;
  /** More bytes than this is `too-large` and nothing is kept. */
  readonly maxBytes?: number;
}

export interface PutResult {
  readonly digest: Digest;
  readonly size: number;
}

/**
 * The read side, all a node needs (the node cache, readBlob, copyBlobToFile): the filesystem store and
 * the HTTP backend a node reads from the API tier (HttpBlobStore) both offer it.
 */
export interface BlobReader {
  has(digest: Digest): Promise<boolean>;
  /** The blob's size, or undefined when there is none. */
  size(digest: Digest): Promise<number | undefined>;
  /**
   * The blob as a stream that fails with `digest-mismatch` at its end when the bytes did not hash to
   * `digest`: a reader keeps nothing it read until the stream ended without error (see readBlob,
   * copyBlobToFile for readers that do this).
   */
  get(digest: Digest): Promise<Readable>;
}

export interface BlobStore extends BlobReader {
  /** Stores the bytes of `source` (all or nothing: a failed or partial put is never visible). */
  put(source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, options?: PutOptions): Promise<PutResult>;
  /** Stores a file's bytes (read without following a symlink at its final component). */
  putFile(path: string, options?: PutOptions): Promise<PutResult>;
  /** Every blob's digest, in no particular order. */
  list(): AsyncIterable<Digest>;
  /**
   * Deletes every blob not in `referenced` that is older than `graceMs` (a blob being put and not yet
   * referenced by the record that will name it is younger than that). Returns the digests deleted.
   */
  sweep(referenced: ReadonlySet<string>, options?: { readonly graceMs?: number }): Promise<Digest[]>;
}
