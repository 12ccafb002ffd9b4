// Blob names: the SHA-256 of the content, as 64 lowercase hex characters. Anything else is refused before
// it becomes part of a path.
import { createHash, type Hash } from 'node:crypto';
import { blobError } from './errors.js';

/** A SHA-256 digest, 64 lowercase hex characters. */
export type Digest = string & { readonly __digest: unique symbol };

const DIGEST = /^[0-9a-f]{64}$/;

export function isDigest(value: unknown): value is Digest {
  return typeof value === 'string' && DIGEST.test(value);
}

/** `value` as a Digest, or an `invalid-digest` error naming `what`. */
export function parseDigest(value: unknown, what = 'digest'): Digest {
  if (!isDigest(value)) {
    throw blobError('invalid-digest', `${what}: 64 lowercase hex characters (a SHA-256)`, { what });
  }
  return value;
}

export function sha256(): Hash {
  return createHash('sha256');
}

export function digestOf(bytes: Uint8Array): Digest {
  return sha256().update(bytes).digest('hex') as Digest;
}
