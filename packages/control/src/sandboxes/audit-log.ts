// Per-sandbox audit trail: the worker's audit batches appended as JSON lines to audit.jsonl, and queries
// over it. Appends of one sandbox are serialized so lines never interleave.
import { appendFile, readFile } from 'node:fs/promises';
import type { AuditEvent } from '@agentfense/protocol';
import type { NetworkAuditEvent } from '@agentfense/network';
import { InvalidArgumentError } from '@agentfense/protocol';

/** Filters of `audit()`. */
export interface AuditQuery {
  readonly decision?: 'allow' | 'deny';
  /** The most recent `limit` events (default 1000). */
  readonly limit?: number;
}

/** The policy point's records (connections and refused DNS questions) instead of the worker's. */
export type NetworkAuditQuery = AuditQuery & { readonly kind: 'network' };

/** Appends audit batches to one file, in order. */
export class AuditWriter {
  readonly #file: string;
  #tail: Promise<void> = Promise.resolve();
  readonly #onError: (err: unknown) => void;

  constructor(file: string, onError: (err: unknown) => void) {
    this.#file = file;
    this.#onError = onError;
  }

  /** Queues a batch; write errors go to onError (audit loss is logged, never thrown into the worker path). */
  append(events: readonly (AuditEvent | NetworkAuditEvent)[]): void {
    if (events.length === 0) return;
    const text = events.map((e) => JSON.stringify(e)).join('\n') + '\n';
    this.#tail = this.#tail.then(() => appendFile(this.#file, text, { mode: 0o600 })).catch(this.#onError);
  }

  /** Resolves when every queued batch is written. */
  flush(): Promise<void> {
    return this.#tail;
  }
}

/** Reads the audit trail of one sandbox, newest last. */
export async function readAudit(file: string, query?: AuditQuery): Promise<AuditEvent[]>;
export async function readAudit(file: string, query: NetworkAuditQuery): Promise<NetworkAuditEvent[]>;
export async function readAudit(
  file: string,
  query: AuditQuery | NetworkAuditQuery = {},
): Promise<AuditEvent[] | NetworkAuditEvent[]> {
  const network = 'kind' in query && query.kind === 'network';
  const limit = query.limit ?? 1000;
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new InvalidArgumentError(`audit limit must be a positive integer, got ${limit}`);
  }
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const out: (AuditEvent | NetworkAuditEvent)[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let event: AuditEvent | NetworkAuditEvent;
    try {
      event = JSON.parse(line) as AuditEvent | NetworkAuditEvent;
    } catch {
      continue; // a torn last line after a crash
    }
    // The policy point's records carry `via`; the worker's never do.
    if ('via' in event !== network) continue;
    if (query.decision !== undefined && event.decision !== query.decision) continue;
    out.push(event);
  }
  return out.slice(-limit) as AuditEvent[] | NetworkAuditEvent[];
}
