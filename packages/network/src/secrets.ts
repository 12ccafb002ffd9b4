// A sandbox's secrets: each a value the agent may use but never read, bound to the hosts (and
// optionally paths and methods) where the policy point puts it into requests. The agent sees only a
// placeholder (docs/secrets.md). Validated once at every boundary into this shape; the value travels
// only in memory and over the policy point's IPC channel, never in a store, argv, env or log.
import { randomBytes } from 'node:crypto';
import { InvalidArgumentError } from '@agentfense/protocol';
import { normalizeHostPattern } from './policy.js';

/** Where a secret may be used, without its value: what may be shown, stored and audited. */
export interface SecretBinding {
  /** An environment variable name: the sandbox gets `NAME=<placeholder>`. */
  readonly name: string;
  /** Host names or `*.domain` wildcards (HTTPS only: plain HTTP never carries the value). */
  readonly hosts: readonly string[];
  /** Path prefixes (`/v1/`); absent: any path. */
  readonly paths?: readonly string[];
  /** HTTP methods; absent: any. */
  readonly methods?: readonly string[];
  /**
   * A header the policy point sets on every request to a bound host, `{value}` standing for the
   * secret: `{ name: 'Authorization', value: 'Bearer {value}' }`. For clients that read no variable.
   */
  readonly header?: { readonly name: string; readonly value: string };
}

/** A secret as the caller gives it: a binding and its value (never from the agent). */
export interface SecretInput extends SecretBinding {
  readonly value: string;
}

/** A secret of one sandbox: its value and the placeholder that stands for it inside. */
export interface SandboxSecret extends SecretInput {
  readonly placeholder: string;
}

/** `af-secret-` and 128 random bits: unique per sandbox and secret, worthless anywhere else. */
export const PLACEHOLDER_PREFIX = 'af-secret-';
/** The largest value taken: API keys and tokens are far smaller. */
const MAX_VALUE_BYTES = 16 * 1024;
const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
const METHOD = /^[A-Z]{1,20}$/;
const KNOWN = ['name', 'hosts', 'paths', 'methods', 'header', 'value'];

function fail(where: string, message: string): never {
  throw new InvalidArgumentError(`${where}: ${message}`);
}

function stringList(value: unknown, where: string, field: string, example: string): string[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'string')) {
    fail(where, `\`${field}\` must be a non-empty array of strings such as ${example}`);
  }
  return value;
}

/** Checks one secret (`where` names it in errors: `secret 0 (OPENAI_API_KEY)`). */
export function validateSecret(raw: unknown, index: number): SecretInput {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    fail(`secret ${index}`, 'must be an object');
  const r = raw as Record<string, unknown>;
  const name = r['name'];
  if (typeof name !== 'string' || !NAME.test(name)) {
    fail(
      `secret ${index}`,
      `name ${JSON.stringify(name)} must be an environment variable name (A-Z, 0-9, _)`,
    );
  }
  const where = `secret ${index} (${name})`;
  for (const key of Object.keys(r)) {
    if (!KNOWN.includes(key))
      fail(where, `unknown field ${JSON.stringify(key)} (known: ${KNOWN.join(', ')})`);
  }
  const hosts = stringList(r['hosts'], where, 'hosts', '["api.openai.com"]').map((h) =>
    normalizeHostPattern(h, where),
  );
  const value = r['value'];
  // Never echoed: the error says what is wrong with the value, not what it is.
  if (typeof value !== 'string' || value.length === 0)
    fail(where, 'has no value (give one from the environment, a file or a command)');
  if (Buffer.byteLength(value) > MAX_VALUE_BYTES)
    fail(where, `the value is longer than ${MAX_VALUE_BYTES} bytes`);
  // CR, LF or NUL in a value would let it split the header it is put into.
  if (/[\r\n\0]/.test(value))
    fail(
      where,
      'the value holds a line break or NUL (a trailing newline of a file or command is removed; others are refused)',
    );
  if (value.includes(PLACEHOLDER_PREFIX)) fail(where, `the value contains "${PLACEHOLDER_PREFIX}"`);
  const paths = r['paths'] === undefined ? undefined : stringList(r['paths'], where, 'paths', '["/v1/"]');
  for (const path of paths ?? [])
    if (!path.startsWith('/')) fail(where, `path ${JSON.stringify(path)} must start with /`);
  const methods =
    r['methods'] === undefined
      ? undefined
      : stringList(r['methods'], where, 'methods', '["POST"]').map((m) => {
          if (!METHOD.test(m.toUpperCase())) fail(where, `method ${JSON.stringify(m)} is not an HTTP method`);
          return m.toUpperCase();
        });
  let header: SecretBinding['header'];
  if (r['header'] !== undefined) {
    const h = r['header'] as Record<string, unknown> | null;
    if (
      typeof h !== 'object' ||
      h === null ||
      typeof h['name'] !== 'string' ||
      typeof h['value'] !== 'string'
    )
      fail(
        where,
        '`header` must be { name, value } such as { "name": "Authorization", "value": "Bearer {value}" }',
      );
    if (!HEADER_NAME.test(h['name']))
      fail(where, `header name ${JSON.stringify(h['name'])} is not an HTTP header name`);
    if (!h['value'].includes('{value}') || /[\r\n\0]/.test(h['value']))
      fail(where, 'the header value must contain {value} (where the secret goes) and no line break');
    header = { name: h['name'], value: h['value'] };
  }
  return {
    name,
    hosts,
    ...(paths === undefined ? {} : { paths }),
    ...(methods === undefined ? {} : { methods }),
    ...(header === undefined ? {} : { header }),
    value,
  };
}

/** Checks a sandbox's secrets: each on its own, names unique. */
export function validateSecrets(input: readonly unknown[] | undefined): SecretInput[] {
  if (input === undefined) return [];
  if (!Array.isArray(input)) fail('secrets', 'must be an array of { name, hosts, value }');
  const secrets = input.map((raw, i) => validateSecret(raw, i));
  const seen = new Set<string>();
  for (const s of secrets) {
    if (seen.has(s.name))
      fail(`secret ${s.name}`, 'is declared twice: give each name once, with all its hosts');
    seen.add(s.name);
  }
  return secrets;
}

/** Gives each secret its placeholder (new random bits each time: per sandbox and secret). */
export function withPlaceholders(secrets: readonly SecretInput[]): SandboxSecret[] {
  return secrets.map((s) => ({
    ...s,
    placeholder: `${PLACEHOLDER_PREFIX}${randomBytes(16).toString('hex')}`,
  }));
}

/** The binding alone: what the store, the APIs and the logs may hold. */
export function secretBinding(secret: SecretBinding): SecretBinding {
  const { name, hosts, paths, methods, header } = secret;
  return {
    name,
    hosts,
    ...(paths === undefined ? {} : { paths }),
    ...(methods === undefined ? {} : { methods }),
    ...(header === undefined ? {} : { header }),
  };
}

/** Whether `host` (lower-case, no trailing dot) is one of `patterns`. */
export function hostMatches(patterns: readonly string[], host: string): boolean {
  return patterns.some((p) => (p.startsWith('*.') ? host.endsWith(p.slice(1)) : p === host));
}

/** The sandbox environment of its secrets: each name with its placeholder. */
export function placeholderEnv(secrets: readonly SandboxSecret[]): Record<string, string> {
  return Object.fromEntries(secrets.map((s) => [s.name, s.placeholder]));
}
