// A sandbox's secrets in the control plane: kept in this process's memory only (never in the store, a
// log or an API answer), handed to the sandbox's policy point at each start, and forgotten at destroy.
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
import type { NetworkPolicy, SandboxSecret, SecretBinding } from '@agentfense/network';

/** A start on a sandbox's instance that is handed its secrets too (a session masks with them). */
export type WithSecrets<T> = (instance: RuntimeInstance, secrets: readonly SandboxSecret[]) => Promise<T>;

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

export class SecretVault {
  readonly #byId = new Map<string, readonly SandboxSecret[]>();

  /**
   * Validates a create's secrets and gives each its placeholder. A secret needs a network to be used
   * on: a sandbox without one (mode none) is refused rather than given placeholders that never work.
   */
  static prepare(input: readonly unknown[] | undefined, network: NetworkPolicy): SandboxSecret[] {
    const secrets = validateSecrets(input);
    if (secrets.length > 0 && network.mode === 'none') {
      throw new InvalidArgumentError(
        `secret ${secrets[0]?.name ?? ''}: the sandbox has no network (mode none); allow the secret's hosts (--allow-host ${secrets[0]?.hosts[0] ?? 'HOST'}) or use --network open`,
      );
    }
    return withPlaceholders(secrets);
  }

  set(id: string, secrets: readonly SandboxSecret[]): void {
    if (secrets.length === 0) return;
    // This process now holds values: no core dump of it, its /proc closed to other uids.
    markNotDumpable();
    this.#byId.set(id, secrets);
  }

  get(id: string): readonly SandboxSecret[] {
    return this.#byId.get(id) ?? [];
  }

  /** The bindings alone (names, hosts): what may be shown. */
  bindings(id: string): SecretBinding[] {
    return this.get(id).map(secretBinding);
  }

  delete(id: string): void {
    this.#byId.delete(id);
  }
}
