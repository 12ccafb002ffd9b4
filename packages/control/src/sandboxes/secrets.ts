// A sandbox's secrets in the control plane: values in this process's memory only (never in the store, a
// log or an API answer; the store keeps bindings and sources), handed to the sandbox's policy point at
// each start, read again from their sources by a process that lacks them, and forgotten at destroy.
// Redaction is the second line: output, diffs and audit records this process returns are searched for
// the real values (in case one leaked another way) and masked.
import { InvalidArgumentError } from '@agentfense/protocol';
import type { ExecOptions, ExecResult, RuntimeInstance } from '@agentfense/protocol';
import {
  markNotDumpable,
  secretBinding,
  swapBytes,
  validateSecrets,
  withPlaceholders,
} from '@agentfense/network';
import type { NetworkPolicy, SandboxSecret } from '@agentfense/network';
import { originOf, resolveSecrets } from '../secret-sources.js';
import type { SecretSource } from '../secret-sources.js';
import type { StoredSecret } from './types.js';

/**
 * A start on a sandbox's instance that is handed its secrets too (a session masks with them), read at
 * each use: a value given later is masked from then on.
 */
export type WithSecrets<T> = (
  instance: RuntimeInstance,
  secrets: () => readonly SandboxSecret[],
) => Promise<T>;

/** What a masked value reads as. */
export function maskOf(name: string): string {
  return `[secret ${name} redacted]`;
}

function maskBytes(data: Uint8Array, secrets: readonly SandboxSecret[]): Buffer {
  let out = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  for (const s of secrets) {
    const value = Buffer.from(s.value);
    if (out.indexOf(value) === -1) continue;
    const parts: Buffer[] = [];
    let p = 0;
    for (let at = out.indexOf(value); at !== -1; at = out.indexOf(value, p)) {
      parts.push(out.subarray(p, at), Buffer.from(maskOf(s.name)));
      p = at + value.length;
    }
    parts.push(out.subarray(p));
    out = Buffer.concat(parts);
  }
  return out;
}

/** `value` with every real value of `secrets` masked, in strings, bytes, arrays and plain objects. */
export function redact<T>(value: T, secrets: readonly SandboxSecret[]): T {
  if (secrets.length === 0) return value;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      let s = v;
      for (const secret of secrets) s = s.split(secret.value).join(maskOf(secret.name));
      return s;
    }
    if (v instanceof Uint8Array) return maskBytes(v, secrets);
    if (Array.isArray(v)) return v.map(walk);
    if (typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype) {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    }
    return v;
  };
  return walk(value) as T;
}

/**
 * A live output callback with the values masked: the last bytes of each chunk that may begin a value
 * wait for the next chunk (or `flush`), so a value split across chunks is masked too.
 */
export function maskingCallback(
  secrets: readonly SandboxSecret[],
  write: (chunk: Buffer) => void,
): { write: (chunk: Buffer) => void; flush: () => void } {
  const swaps = secrets.map((s) => ({ from: Buffer.from(s.value), to: Buffer.from(maskOf(s.name)) }));
  let carry = Buffer.alloc(0);
  const emit = (data: Buffer, final: boolean): void => {
    const { out, kept } = swapBytes(data, swaps, final);
    carry = Buffer.from(data.subarray(data.length - kept));
    if (out.length > 0) write(out);
  };
  return {
    write: (chunk) => emit(carry.length === 0 ? chunk : Buffer.concat([carry, chunk]), false),
    flush: () => emit(carry, true),
  };
}

/** Runs `exec` with its live output and its result masked (nothing to do without secrets). */
export async function maskedExec<O extends ExecOptions>(
  exec: (options: O) => Promise<ExecResult>,
  options: O,
  secrets: readonly SandboxSecret[],
): Promise<ExecResult> {
  if (secrets.length === 0) return exec(options);
  const out = options.onStdout === undefined ? undefined : maskingCallback(secrets, options.onStdout);
  const err = options.onStderr === undefined ? undefined : maskingCallback(secrets, options.onStderr);
  try {
    const result = await exec({
      ...options,
      ...(out === undefined ? {} : { onStdout: out.write }),
      ...(err === undefined ? {} : { onStderr: err.write }),
    });
    return redact(result, secrets);
  } finally {
    out?.flush();
    err?.flush();
  }
}

/** What one process holds of a sandbox's secrets. */
export interface HeldSecrets {
  /** The secrets whose values this process holds: the ones the policy point is given. */
  readonly usable: readonly SandboxSecret[];
  /** Every secret's placeholder by name, usable or not: the sandbox's variables. */
  readonly placeholders: Readonly<Record<string, string>>;
  /** Which secrets are not usable and what to do about it (the sandbox's state reason); null: none. */
  readonly reason: string | null;
  /** The same, by secret name. */
  readonly missing: Readonly<Record<string, string>>;
  /**
   * The kept source (JSON) each held value was read from: one another process has replaced since
   * (setSecret through the CLI) is read again at the next start rather than its old value used.
   */
  readonly origins: Readonly<Record<string, string>>;
}

const NONE: HeldSecrets = { usable: [], placeholders: {}, reason: null, missing: {}, origins: {} };

const originKey = (source: StoredSecret['source']): string => JSON.stringify(source);
const originsOf = (stored: readonly StoredSecret[]): Record<string, string> =>
  Object.fromEntries(stored.map((s) => [s.name, originKey(s.source)]));

function reasonOf(missing: Readonly<Record<string, string>>): string | null {
  const reasons = Object.values(missing);
  return reasons.length === 0 ? null : reasons.join('; ');
}

/** Why a secret given by value is missing in a process that did not create its sandbox. */
function notKept(name: string, id: string): string {
  return `secret ${name} was given by value, which is never stored, so this control plane does not have it: its placeholder is set but never replaced; give it a value again (agentfense sandbox secret ${id} ${name}, library sb.setSecret, HTTP PUT /v1/sandboxes/${id}/secrets/${name}, gRPC SetSecret), or declare it from env:VAR, file:PATH or cmd:ARGV, which a later start reads again`;
}

export class SecretVault {
  readonly #byId = new Map<string, HeldSecrets>();

  /**
   * Reads and validates a create's secrets and gives each its placeholder; returns them and what the
   * store keeps of them (never a value). A secret needs a network to be used on: a sandbox without one
   * (mode none) is refused, before any source is read, rather than given placeholders that never work.
   */
  static async prepare(
    input: readonly SecretSource[] | undefined,
    network: NetworkPolicy,
  ): Promise<{ secrets: SandboxSecret[]; stored: StoredSecret[] }> {
    const sources = input ?? [];
    if (sources.length > 0 && network.mode === 'none') {
      const first = sources[0];
      throw new InvalidArgumentError(
        `secret ${first?.name ?? ''}: the sandbox has no network (mode none); allow the secret's hosts (--allow-host ${first?.hosts[0] ?? 'HOST'}) or use --network open`,
      );
    }
    const origins = sources.map(originOf);
    const secrets = withPlaceholders(validateSecrets(await resolveSecrets(sources)));
    const stored = secrets.map((s, i) => ({
      ...secretBinding(s),
      placeholder: s.placeholder,
      source: origins[i] ?? null,
    }));
    return { secrets, stored };
  }

  set(id: string, secrets: readonly SandboxSecret[], stored: readonly StoredSecret[]): void {
    if (secrets.length === 0) return;
    // This process now holds values: no core dump of it, its /proc closed to other uids.
    markNotDumpable();
    const placeholders = Object.fromEntries(secrets.map((s) => [s.name, s.placeholder]));
    this.#byId.set(id, {
      usable: secrets,
      placeholders,
      reason: null,
      missing: {},
      origins: originsOf(stored),
    });
  }

  /**
   * Gives one declared secret of sandbox `id` its value (setSecret), replacing any it had; `stored` is
   * every secret the sandbox declares. Returns what this process now holds.
   */
  give(
    id: string,
    stored: readonly StoredSecret[],
    secret: SandboxSecret,
    origin: StoredSecret['source'],
  ): HeldSecrets {
    markNotDumpable();
    const held = this.#byId.get(id) ?? NONE;
    const usable = [...held.usable.filter((s) => s.name !== secret.name), secret];
    const { [secret.name]: _given, ...missing } = held.missing;
    const placeholders = Object.fromEntries(stored.map((s) => [s.name, s.placeholder]));
    const origins = { ...held.origins, [secret.name]: originKey(origin) };
    const now = { usable, placeholders, reason: reasonOf(missing), missing, origins };
    this.#byId.set(id, now);
    return now;
  }

  /**
   * What a start gives the sandbox: the values this process holds, and those it lacks read again from
   * their kept sources (a control plane opened after the create). A secret given by value, or whose
   * source fails now, stays a placeholder with no value, and the reason names it and the fix.
   */
  async load(id: string, stored: readonly StoredSecret[]): Promise<HeldSecrets> {
    const held = this.#byId.get(id) ?? NONE;
    const current = (kept: StoredSecret): boolean => held.origins[kept.name] === originKey(kept.source);
    if (stored.length === 0) return held;
    if (held.reason === null && held.usable.length === stored.length && stored.every(current)) return held;
    const usable: SandboxSecret[] = [];
    const missing: Record<string, string> = {};
    const origins: Record<string, string> = {};
    for (const kept of stored) {
      origins[kept.name] = originKey(kept.source);
      const had = current(kept) ? held.usable.find((s) => s.name === kept.name) : undefined;
      if (had !== undefined) usable.push(had);
      else if (kept.source === null) missing[kept.name] = notKept(kept.name, id);
      else {
        try {
          const [input] = validateSecrets(await resolveSecrets([{ ...secretBinding(kept), ...kept.source }]));
          if (input !== undefined) usable.push({ ...input, placeholder: kept.placeholder });
        } catch (err) {
          // The message names the secret and its source, never a value (secret-sources.ts).
          missing[kept.name] =
            `${(err as Error).message}: its placeholder is set but never replaced; fix the source and start the sandbox again, or give it a value (agentfense sandbox secret ${id} ${kept.name})`;
        }
      }
    }
    if (usable.length > 0) markNotDumpable();
    const placeholders = Object.fromEntries(stored.map((s) => [s.name, s.placeholder]));
    const loaded = { usable, placeholders, reason: reasonOf(missing), missing, origins };
    this.#byId.set(id, loaded);
    return loaded;
  }

  /** What this process holds of sandbox `id`. */
  held(id: string): HeldSecrets {
    return this.#byId.get(id) ?? NONE;
  }

  get(id: string): readonly SandboxSecret[] {
    return this.#byId.get(id)?.usable ?? [];
  }

  delete(id: string): void {
    this.#byId.delete(id);
  }
}
