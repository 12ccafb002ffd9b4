// The value space that crosses the wire: null, undefined, booleans, numbers, strings, binary (Uint8Array),
// arrays and plain objects. msgpackr would happily carry Dates, Sets, RegExps, Errors, BigInts and typed
// arrays through its extensions, and decodes them whatever the options say; we refuse them both ways so
// that a peer only ever hands us JSON-like data plus bytes, and a sender learns about a stray Date at once.

import { ProtocolError } from '../errors.js';
import { describeValue, isPlainObject } from './guards.js';

/** Deeper than any real message; stops cycles and stack-exhaustion payloads. */
export const MAX_NESTING_DEPTH = 64;

/** Throws ProtocolError naming the first value under `value` that is not plain data. */
export function assertPlainData(value: unknown, path = '$'): void {
  check(value, path, 0);
}

function check(value: unknown, path: string, depth: number): void {
  switch (typeof value) {
    case 'undefined':
    case 'boolean':
    case 'number':
    case 'string':
      return;
    case 'object':
      break;
    default:
      throw notPlain(path, value);
  }
  if (value === null) return;
  // Exactly Uint8Array or Buffer: other typed arrays would travel as a msgpackr extension, not as `bin`.
  if (value instanceof Uint8Array) {
    const ctor = value.constructor;
    if (ctor === Uint8Array || ctor === Buffer) return;
    throw notPlain(path, value);
  }
  if (depth >= MAX_NESTING_DEPTH) {
    throw new ProtocolError(
      `value at ${path} is nested more than ${MAX_NESTING_DEPTH} levels deep (a cycle?)`,
    );
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) check(value[i], `${path}[${i}]`, depth + 1);
    return;
  }
  if (!isPlainObject(value)) throw notPlain(path, value);
  for (const key of Object.keys(value)) check(value[key], `${path}.${key}`, depth + 1);
}

function notPlain(path: string, value: unknown): ProtocolError {
  return new ProtocolError(
    `value at ${path} is ${describeValue(value)}; only null, booleans, numbers, strings, Uint8Array, ` +
      'arrays and plain objects cross the wire',
  );
}
