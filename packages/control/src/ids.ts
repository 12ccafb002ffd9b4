// Resource ids (contract §6): `cb_<uuid>`, `sb_<uuid>`, `ses_<uuid>`; `cp_<uuid>` (checkpoints) and
// `ly_<uuid>` (their frozen layers, internal). Every id that comes from a client goes
// through validateId() before it reaches a path or a query, so an id can never name anything but itself.
import { randomUUID } from 'node:crypto';
import { InvalidArgumentError } from '@agentfense/protocol/core';

/** The id kinds and their prefixes. */
export const ID_PREFIXES = {
  codebase: 'cb',
  sandbox: 'sb',
  session: 'ses',
  checkpoint: 'cp',
  layer: 'ly',
} as const;
export type IdKind = keyof typeof ID_PREFIXES;

/** A lower-case RFC 4122 UUID as randomUUID() prints it. */
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const PATTERNS: Record<IdKind, RegExp> = {
  codebase: new RegExp(`^cb_${UUID}$`),
  sandbox: new RegExp(`^sb_${UUID}$`),
  session: new RegExp(`^ses_${UUID}$`),
  checkpoint: new RegExp(`^cp_${UUID}$`),
  layer: new RegExp(`^ly_${UUID}$`),
};

/** A fresh id of `kind`. */
export function newId(kind: IdKind): string {
  return `${ID_PREFIXES[kind]}_${randomUUID()}`;
}

/** Returns `value` when it is a well-formed id of `kind`; throws InvalidArgumentError naming it otherwise. */
export function validateId(kind: IdKind, value: unknown): string {
  if (typeof value !== 'string' || !PATTERNS[kind].test(value)) {
    const shown = typeof value === 'string' ? JSON.stringify(value.slice(0, 80)) : typeof value;
    throw new InvalidArgumentError(
      `invalid ${kind} id ${shown}: expected ${ID_PREFIXES[kind]}_<uuid> (lower-case hex)`,
    );
  }
  return value;
}

/** True when `value` is a well-formed id of `kind`. */
export function isId(kind: IdKind, value: unknown): value is string {
  return typeof value === 'string' && PATTERNS[kind].test(value);
}
