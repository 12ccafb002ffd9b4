// Session ids: `ses_<uuid>` (contract §6). Ids from callers are validated before use, like every other id.
import { randomUUID } from 'node:crypto';
import { InvalidArgumentError } from '@agentfense/protocol';

const SESSION_ID = /^ses_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A fresh session id. */
export function newSessionId(): string {
  return `ses_${randomUUID()}`;
}

/** True for a well-formed session id (lowercase uuid). */
export function isSessionId(value: unknown): value is string {
  return typeof value === 'string' && SESSION_ID.test(value);
}

/** Throws InvalidArgumentError unless `value` is a well-formed session id. */
export function assertSessionId(value: unknown): asserts value is string {
  if (!isSessionId(value)) {
    throw new InvalidArgumentError(`invalid session id ${JSON.stringify(value)}: expected ses_<uuid>`);
  }
}
