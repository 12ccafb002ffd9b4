// The API tier's token: every /v1 request carries `Authorization: Bearer <token>`. Compared through
// fixed-length digests so the comparison's time says nothing about the token.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { InvalidArgumentError } from '@agentfense/protocol';

/** The shortest token accepted: a guessable one would make the agent's port root for anyone on the network. */
export const MIN_TOKEN_LENGTH = 32;

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/** A checker for `token` (refused if shorter than MIN_TOKEN_LENGTH). */
export function tokenChecker(token: string): (req: IncomingMessage) => boolean {
  if (token.length < MIN_TOKEN_LENGTH) {
    throw new InvalidArgumentError(
      `the node agent's token must have at least ${MIN_TOKEN_LENGTH} characters`,
    );
  }
  const expected = digest(token);
  return (req) => {
    const header = req.headers.authorization;
    if (typeof header !== 'string' || !header.startsWith('Bearer ')) return false;
    return timingSafeEqual(digest(header.slice('Bearer '.length)), expected);
  };
}
