// Per-sandbox audit trail: the worker's audit batches appended as JSON lines to audit.jsonl, and queries
// over it. Appends of one sandbox are serialized so lines never interleave. The trail is bounded: at
// `maxBytes` the file is renamed to audit.jsonl.1 (replacing the one before) and a new one begun, and
// floods of similar denials are collapsed (collapse.ts) so they cannot evict everything else.
// Reads stream both files line by line: no size of trail is ever one string.
import { createReadStream } from 'node:fs';
import { appendFile, rename, stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { AuditEvent } from '@agentfense/protocol';
import type { NetworkAuditEvent } from '@agentfense/network';
import { InvalidArgumentError } from '@agentfense/protocol';
import { DenialCollapser, WINDOW_MS } from './collapse.js';

/** Filters of `audit()`. */
export interface AuditQuery {
  readonly decision?: 'allow' | 'deny';
  /** The most recent `limit` events (default 1000). */
  readonly limit?: number;
}

/** The policy point's records (connections and refused DNS questions) instead of the worker's. */
export type NetworkAuditQuery = AuditQuery & { readonly kind: 'network' };

/** Bytes of one trail file before it is rotated, unless AGENTFENSE_AUDIT_MAX_BYTES says otherwise. */
export const DEFAULT_AUDIT_MAX_BYTES = 32 * 1024 * 1024;
const MIN_AUDIT_MAX_BYTES = 4096;

export interface AuditWriterOptions {
  /** Bytes of audit.jsonl before it is rotated (default: auditMaxBytes()). */
  readonly maxBytes?: number;
}

/** The cap per trail file: AGENTFENSE_AUDIT_MAX_BYTES when set (a whole number of bytes), else the default. */
export function auditMaxBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env['AGENTFENSE_AUDIT_MAX_BYTES'];
  if (raw === undefined || raw === '') return DEFAULT_AUDIT_MAX_BYTES;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < MIN_AUDIT_MAX_BYTES) {
    throw new InvalidArgumentError(
      `AGENTFENSE_AUDIT_MAX_BYTES=${JSON.stringify(raw)}: expected a whole number of bytes, at least ${MIN_AUDIT_MAX_BYTES} (default ${DEFAULT_AUDIT_MAX_BYTES}); unset it for the default`,
    );
  }
  return value;
}

/** The rotated file of a trail. */
export function rotatedAuditFile(file: string): string {
  return `${file}.1`;
}

/** Appends audit batches to one file, in order, within its size cap. */
export class AuditWriter {
  readonly #file: string;
  readonly #maxBytes: number;
  readonly #collapser = new DenialCollapser();
  #tail: Promise<void> = Promise.resolve();
  /** Bytes in the file now; read from it at the first write. */
  #size: number | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #onError: (err: unknown) => void;

  constructor(file: string, onError: (err: unknown) => void, options: AuditWriterOptions = {}) {
    this.#file = file;
    this.#onError = onError;
    this.#maxBytes = options.maxBytes ?? auditMaxBytes();
  }

  /** Queues a batch; write errors go to onError (audit loss is logged, never thrown into the worker path). */
  append(events: readonly (AuditEvent | NetworkAuditEvent)[]): void {
    if (events.length === 0) return;
    this.#queue(this.#collapser.filter(events));
    // Counted denials are written when their window ends, even if nothing follows them.
    if (this.#collapser.pending) this.#timer ??= setTimeout(() => this.#drain(false), WINDOW_MS).unref();
  }

  /** Resolves when every queued batch is written (counted denials included). */
  flush(): Promise<void> {
    this.#drain(true);
    return this.#tail;
  }

  #drain(all: boolean): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#queue(this.#collapser.drain(Date.now(), all));
    if (this.#collapser.pending) this.#timer = setTimeout(() => this.#drain(false), WINDOW_MS).unref();
  }

  #queue(events: readonly (AuditEvent | NetworkAuditEvent)[]): void {
    if (events.length === 0) return;
    const lines = events.map((e) => `${JSON.stringify(e)}\n`);
    this.#tail = this.#tail.then(() => this.#write(lines)).catch(this.#onError);
  }

  async #write(lines: readonly string[]): Promise<void> {
    this.#size ??= await sizeOf(this.#file);
    let chunk = '';
    let chunkBytes = 0;
    for (const line of lines) {
      const bytes = Buffer.byteLength(line);
      if (this.#size + chunkBytes + bytes > this.#maxBytes && this.#size + chunkBytes > 0) {
        if (chunk !== '') await appendFile(this.#file, chunk, { mode: 0o600 });
        await rename(this.#file, rotatedAuditFile(this.#file));
        this.#size = 0;
        chunk = '';
        chunkBytes = 0;
      }
      chunk += line;
      chunkBytes += bytes;
    }
    await appendFile(this.#file, chunk, { mode: 0o600 });
    this.#size += chunkBytes;
  }
}

/** Reads the audit trail of one sandbox (the rotated file, then the current one), newest last. */
export async function readAudit(file: string, query?: AuditQuery): Promise<AuditEvent[]>;
export async function readAudit(file: string, query: NetworkAuditQuery): Promise<NetworkAuditEvent[]>;
export async function readAudit(
  file: string,
  query: AuditQuery | NetworkAuditQuery = {},
): Promise<AuditEvent[] | NetworkAuditEvent[]> {
  // The policy point's records carry `via`; the worker's never do.
  const network = 'kind' in query && query.kind === 'network';
  const limit = query.limit ?? 1000;
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new InvalidArgumentError(`audit limit must be a positive integer, got ${limit}`);
  }
  // The last `limit` matches, in a ring: memory is bounded by the limit, not by the trail.
  const ring: (AuditEvent | NetworkAuditEvent)[] = [];
  let next = 0;
  for (const path of [rotatedAuditFile(file), file]) {
    for await (const event of eventsOf(path)) {
      if ('via' in event !== network) continue;
      if (query.decision !== undefined && event.decision !== query.decision) continue;
      if (ring.length < limit) ring.push(event);
      else ring[next] = event;
      next = (next + 1) % limit;
    }
  }
  const ordered = ring.length < limit ? ring : [...ring.slice(next), ...ring.slice(0, next)];
  return ordered as AuditEvent[] | NetworkAuditEvent[];
}

/** The events of one file, line by line; nothing for a missing file, a torn line skipped. */
async function* eventsOf(path: string): AsyncGenerator<AuditEvent | NetworkAuditEvent> {
  const stream = createReadStream(path, { encoding: 'utf8' });
  const opened = await new Promise<boolean>((resolve, reject) => {
    stream.once('ready', () => resolve(true));
    stream.once('error', (err: NodeJS.ErrnoException) =>
      err.code === 'ENOENT' ? resolve(false) : reject(err),
    );
  });
  if (!opened) return;
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  try {
    for await (const line of lines) {
      if (line === '') continue;
      let event: unknown;
      try {
        event = JSON.parse(line);
      } catch {
        continue; // a torn last line after a crash
      }
      if (typeof event === 'object' && event !== null && 'decision' in event) {
        yield event as AuditEvent | NetworkAuditEvent;
      }
    }
  } finally {
    lines.close();
    stream.destroy();
  }
}

async function sizeOf(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
}
