// Audit events: every denial (and every allowed access when enabled) is batched and streamed to the
// control plane. Batching keeps a `find` over thousands of files from costing one message per access.
import type { AuditEvent } from '@agentfense/protocol';

/** Flush at least this often so `agentfense audit` is close to live. */
export const AUDIT_FLUSH_MS = 50;
/** Flush early when this many events are waiting. */
export const AUDIT_BATCH = 512;
/** Above this many unsent events (a stalled control plane), new ones are counted as dropped, not kept. */
export const AUDIT_BACKLOG_LIMIT = 100_000;

export interface AuditOptions {
  /** Receives each batch (the worker emits it as an `audit` event). */
  readonly emit: (events: AuditEvent[]) => void;
  /** Also record allowed accesses (denials are always recorded). */
  readonly allowed?: boolean;
}

/** Collects decisions and emits them in batches. */
export class AuditLog {
  #seq = 0;
  #pending: AuditEvent[] = [];
  #timer: NodeJS.Timeout | undefined;
  #dropped = 0;
  allowed: boolean;
  readonly #emit: (events: AuditEvent[]) => void;

  constructor(options: AuditOptions) {
    this.#emit = options.emit;
    this.allowed = options.allowed ?? false;
  }

  /** Events lost to a full backlog since the worker started. */
  get dropped(): number {
    return this.#dropped;
  }

  /** Records a decision; allowed ones only when enabled. */
  record(event: Omit<AuditEvent, 'seq' | 'time'>): void {
    if (event.decision === 'allow' && !this.allowed) return;
    if (this.#pending.length >= AUDIT_BACKLOG_LIMIT) {
      this.#dropped++;
      return;
    }
    this.#pending.push({ seq: ++this.#seq, time: Date.now(), ...event });
    if (this.#pending.length >= AUDIT_BATCH) this.flush();
    else this.#timer ??= setTimeout(() => this.flush(), AUDIT_FLUSH_MS).unref();
  }

  /** Emits everything pending now. */
  flush(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pending.length === 0) return;
    const batch = this.#pending;
    this.#pending = [];
    this.#emit(batch);
  }
}
