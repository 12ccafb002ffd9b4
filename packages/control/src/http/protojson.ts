// grpc-gateway's JSON mapping (protojson, as the gateway's default marshaler configures it), applied to
// every route from its JSON Schemas, so clients written for the original's gateway work unchanged:
// - output: lowerCamelCase names (`exitCode`), every field present (defaults emitted), int64 as strings;
// - input: the JSON name (`ownerId`) or the proto name (`owner_id`), unknown fields ignored, enums by
//   name or number (`*_UNSPECIFIED`/0 = not set), int64 as strings or numbers, a field set to its proto3
//   default ("", 0, false, null, "0s") counts as absent, as it does in protobuf.
// Schemas are written once, with proto names; annotations mark what JSON Schema cannot say:
// `x-int64` (a 64-bit integer), `x-enum` (the enum's names by number), `x-duration` (a Duration).
import type { Schema } from './schemas.js';

/** Annotation keywords our schemas carry (registered with ajv; turned into OpenAPI by `documented`). */
export const PROTO_KEYWORDS = ['x-int64', 'x-enum', 'x-duration'] as const;

/** protobuf's JSON name of a field: `owner_id` → `ownerId`. */
export function jsonName(protoName: string): string {
  return protoName.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/** The proto name of a JSON name: `ownerId` → `owner_id`. */
function protoName(json: string): string {
  return json.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

interface SchemaShape {
  readonly type?: string | readonly string[];
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly additionalProperties?: Schema | boolean;
  readonly items?: Schema;
  readonly 'x-int64'?: boolean;
  readonly 'x-enum'?: readonly string[];
  readonly 'x-duration'?: boolean;
}

function types(schema: SchemaShape): readonly string[] {
  return schema.type === undefined ? [] : [schema.type].flat();
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const DROP = Symbol('absent');
const INTEGER = /^-?\d+$/;

/**
 * A request body or query string as the handler expects it: proto names only, unknown fields gone,
 * enums by name, int64 strings as numbers, proto3 defaults removed. Values that still do not fit stay as
 * they are, so the validator that runs next names them.
 */
export function normalizeInput(value: unknown, schema: Schema): unknown {
  const shape = schema as SchemaShape;
  if (shape.properties !== undefined && isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [key, field] of Object.entries(value)) {
      const name = key in shape.properties ? key : protoName(key);
      const fieldSchema = shape.properties[name];
      if (fieldSchema === undefined) continue; // unknown fields are ignored, as the gateway does
      const normalized = normalizeField(field, fieldSchema);
      if (normalized !== DROP) out[name] = normalized;
    }
    return out;
  }
  if (isPlainObject(shape.additionalProperties) && isPlainObject(value)) {
    const values = shape.additionalProperties;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalizeInput(v, values)]));
  }
  if (shape.items !== undefined && Array.isArray(value)) {
    const items = shape.items;
    return value.map((item) => normalizeInput(item, items));
  }
  return normalizeScalar(value, shape);
}

/** A field of an object: also drops what protobuf would not distinguish from "not set". */
function normalizeField(value: unknown, schema: Schema): unknown {
  if (value === null) return DROP;
  const shape = schema as SchemaShape;
  const normalized = normalizeInput(value, schema);
  const names = shape['x-enum'];
  if (names !== undefined && normalized === names[0]) return DROP;
  if (normalized === '' && types(shape).includes('string')) return DROP;
  if (normalized === false && types(shape).includes('boolean')) return DROP;
  if (normalized === 0 && (shape['x-int64'] === true || types(shape).includes('integer'))) return DROP;
  if (shape['x-duration'] === true && (normalized === 0 || normalized === '0s')) return DROP;
  return normalized;
}

function normalizeScalar(value: unknown, shape: SchemaShape): unknown {
  const names = shape['x-enum'];
  if (names !== undefined) {
    const number =
      typeof value === 'number'
        ? value
        : typeof value === 'string' && INTEGER.test(value)
          ? Number(value)
          : undefined;
    return number !== undefined && Number.isInteger(number) && names[number] !== undefined
      ? names[number]
      : value;
  }
  if ((shape['x-int64'] === true || types(shape).includes('integer')) && typeof value === 'string') {
    if (INTEGER.test(value) && Number.isSafeInteger(Number(value))) return Number(value);
  }
  return value;
}

/** An answer as the gateway would marshal it: JSON names, int64 as decimal strings. */
export function toJsonOutput(value: unknown, schema: Schema | undefined): unknown {
  const shape = (schema ?? {}) as SchemaShape;
  if (shape.properties !== undefined && isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [key, field] of Object.entries(value)) {
      out[jsonName(key)] = toJsonOutput(field, shape.properties[key]);
    }
    return out;
  }
  if (isPlainObject(shape.additionalProperties) && isPlainObject(value)) {
    const values = shape.additionalProperties;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toJsonOutput(v, values)]));
  }
  if (shape.items !== undefined && Array.isArray(value)) {
    const items = shape.items;
    return value.map((item) => toJsonOutput(item, items));
  }
  if (shape['x-int64'] === true && typeof value === 'number') return String(value);
  return value;
}

/** JSON names for an object without a schema (stream lines built from a known shape). */
export function camelKeys(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [jsonName(k), v]));
}

/**
 * A schema as the OpenAPI document shows it. `direction` output: JSON names, int64 as strings; input:
 * JSON names (proto names are accepted too, documented in the description), int64 as string or integer,
 * enums by name or number. Annotation keywords are replaced by standard ones.
 */
export function documented(schema: Schema, direction: 'input' | 'output'): Schema {
  const shape = schema as SchemaShape & Record<string, unknown>;
  const { 'x-int64': int64, 'x-enum': names, 'x-duration': _duration, ...rest } = shape;
  const out: Record<string, unknown> = { ...rest };
  if (shape.properties !== undefined) {
    out.properties = Object.fromEntries(
      Object.entries(shape.properties).map(([k, v]) => [jsonName(k), documented(v, direction)]),
    );
    if (Array.isArray(shape.required)) out.required = (shape.required as string[]).map(jsonName);
    // Unknown fields are ignored on input; answers may gain fields.
    if (direction === 'input') delete out.additionalProperties;
  }
  if (isPlainObject(shape.additionalProperties)) {
    out.additionalProperties = documented(shape.additionalProperties, direction);
  }
  if (shape.items !== undefined) out.items = documented(shape.items, direction);
  if (int64 === true) {
    const { minimum: _min, ...numberless } = out as { minimum?: number } & Record<string, unknown>;
    const nullable = types(shape).includes('null');
    return direction === 'output'
      ? { ...numberless, type: nullable ? ['string', 'null'] : 'string', format: 'int64' }
      : {
          ...numberless,
          type: ['integer', 'string'],
          format: 'int64',
          pattern: '^-?[0-9]+$',
          ...(_min === undefined ? {} : { minimum: _min }),
        };
  }
  if (names !== undefined && direction === 'input') {
    const { enum: accepted, type: _type, ...others } = out as { enum?: string[]; type?: unknown };
    return {
      ...others,
      anyOf: [
        { type: 'string', enum: [...new Set([...(accepted ?? []), ...names])] },
        { type: 'integer', minimum: 0, maximum: names.length - 1 },
      ],
    };
  }
  return out;
}
