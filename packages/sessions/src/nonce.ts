// Per-command nonces: 128 random bits, so no output can contain a trailer it has not seen.
import { randomBytes } from 'node:crypto';

/** 32 lowercase hex digits (trailer.ts NONCE_PATTERN). */
export function newNonce(): string {
  return randomBytes(16).toString('hex');
}
