// Tiny shape checks for values decoded from the wire. Each check names the exact path that failed
// (`params.rules[2].pattern must be a string`) and throws InvalidArgumentError; a boundary that means
// something else by "bad shape" (a peer breaking the protocol) rewraps it with its own error kind.

import { InvalidArgumentError } from '../errors.js';

/** Parses `value` (found at `path`) as a T or throws InvalidArgumentError naming the path. */
export type Guard<T> = (value: unknown, path: string) => T;

/** A short, bounded rendering of a bad value for error messages (never the whole payload). */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (value instanceof Uint8Array) return `${value.byteLength} bytes`;
  if (typeof value === 'string') {
    return value.length > 40
      ? `string ${JSON.stringify(value.slice(0, 40))}...`
      : `string ${JSON.stringify(value)}`;
  }
  if (typeof value === 'object') {
    const name = (Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null)?.constructor
      ?.name;
    return name === undefined || name === 'Object' ? 'an object' : `a ${name}`;
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return `${typeof value} ${value}`;
  }
  return `a ${typeof value}`;
}

function fail(path: string, expected: string, value: unknown): never {
  throw new InvalidArgumentError(`${path} must be ${expected} (got ${describeValue(value)})`);
}

/** True for `{}`-style objects: not null, not an array, not bytes, not a class instance. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** A plain object; its fields are checked by the caller. */
export const object: Guard<Record<string, unknown>> = (value, path) =>
  isPlainObject(value) ? value : fail(path, 'an object', value);

/** Any string. */
export const string: Guard<string> = (value, path) =>
  typeof value === 'string' ? value : fail(path, 'a string', value);

/** A finite number. */
export const number: Guard<number> = (value, path) =>
  typeof value === 'number' && Number.isFinite(value) ? value : fail(path, 'a finite number', value);

/** An integer >= 0 that survives float64 (counts, sizes, sequence numbers). */
export const count: Guard<number> = (value, path) =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
    ? value
    : fail(path, 'a non-negative integer', value);

/** A boolean. */
export const boolean: Guard<boolean> = (value, path) =>
  typeof value === 'boolean' ? value : fail(path, 'a boolean', value);

/** Binary data (msgpack `bin`; a Buffer in Node, which is a Uint8Array). */
export const bytes: Guard<Uint8Array> = (value, path) =>
  value instanceof Uint8Array ? value : fail(path, 'binary data (Uint8Array)', value);

/** One of a fixed set of strings. */
export function oneOf<const T extends string>(values: readonly T[]): Guard<T> {
  return (value, path) =>
    typeof value === 'string' && (values as readonly string[]).includes(value)
      ? (value as T)
      : fail(path, `one of ${values.map((v) => `'${v}'`).join(', ')}`, value);
}

/** An array whose every item passes `item`. */
export function arrayOf<T>(item: Guard<T>): Guard<T[]> {
  return (value, path) => {
    if (!Array.isArray(value)) fail(path, 'an array', value);
    return value.map((v: unknown, i) => item(v, `${path}[${i}]`));
  };
}

/** `item`, or undefined when the field is absent. */
export function optional<T>(item: Guard<T>): Guard<T | undefined> {
  return (value, path) => (value === undefined ? undefined : item(value, path));
}

/** `item`, or null. */
export function nullable<T>(item: Guard<T>): Guard<T | null> {
  return (value, path) => (value === null ? null : item(value, path));
}

/** A plain object whose every value passes `item` (keys are free-form). */
export function recordOf<T>(item: Guard<T>): Guard<Record<string, T>> {
  return (value, path) => {
    const obj = object(value, path);
    const out: Record<string, T> = {};
    for (const [key, v] of Object.entries(obj)) {
      // defineProperty, not assignment: a key named `__proto__` must stay data, never a prototype.
      Object.defineProperty(out, key, {
        value: item(v, `${path}.${key}`),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  };
}

type Shape = Record<string, Guard<unknown>>;
type FromShape<S extends Shape> = {
  [K in keyof S as undefined extends ReturnType<S[K]> ? never : K]: ReturnType<S[K]>;
} & {
  [K in keyof S as undefined extends ReturnType<S[K]> ? K : never]?: ReturnType<S[K]>;
};

/**
 * A plain object with the given fields, rebuilt so that only known fields survive (a peer cannot smuggle
 * extra properties through). Absent optional fields stay absent.
 */
export function shape<S extends Shape>(fields: S): Guard<FromShape<S>> {
  return (value, path) => {
    const obj = object(value, path);
    const out: Record<string, unknown> = {};
    for (const [key, guard] of Object.entries(fields)) {
      const parsed = guard(obj[key], `${path}.${key}`);
      if (parsed !== undefined) out[key] = parsed;
    }
    return out as FromShape<S>;
  };
}
