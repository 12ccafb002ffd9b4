// Opaque page tokens for keyset pagination over (created_at, id): stable under inserts and deletes.
import { InvalidArgumentError } from '@agentfense/protocol/core';

/** The position after which the next page starts. */
export interface PageCursor {
  readonly createdAt: number;
  readonly id: string;
}

export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1000;

/** Encodes a cursor as an opaque URL-safe token. */
export function encodePageToken(cursor: PageCursor): string {
  return Buffer.from(JSON.stringify([cursor.createdAt, cursor.id]), 'utf8').toString('base64url');
}

/** Decodes a token made by encodePageToken; anything else is an InvalidArgumentError. */
export function decodePageToken(token: string): PageCursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    !Number.isSafeInteger(parsed[0]) ||
    typeof parsed[1] !== 'string'
  ) {
    throw new InvalidArgumentError(`invalid page token ${JSON.stringify(token.slice(0, 80))}`);
  }
  return { createdAt: parsed[0] as number, id: parsed[1] };
}

/** Checks a requested page size (default DEFAULT_PAGE_SIZE, 1..MAX_PAGE_SIZE). */
export function pageSize(requested: number | undefined): number {
  if (requested === undefined) return DEFAULT_PAGE_SIZE;
  if (!Number.isSafeInteger(requested) || requested < 1 || requested > MAX_PAGE_SIZE) {
    throw new InvalidArgumentError(`page size must be an integer in 1..${MAX_PAGE_SIZE}, got ${requested}`);
  }
  return requested;
}
