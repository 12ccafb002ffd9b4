// A flood of denials must not push everything else out of a sandbox's bounded audit trail (trail.ts
// rotates it at a size cap): per kind of denial (op, errno, permission) only the first few of each second
// are written one by one; the rest are counted and written as one record carrying `similar`.
import type { AuditEvent } from '@agentfense/protocol';
import type { NetworkAuditEvent } from '@agentfense/network';

/** A record of the trail: the worker's or the network policy point's. */
type TrailEvent = AuditEvent | NetworkAuditEvent;

/** Denials of one kind written one by one per window. */
export const DENIALS_PER_WINDOW = 20;
/** The window, in the events' own milliseconds (AuditEvent.time). */
export const WINDOW_MS = 1000;
/** Kinds remembered at most (the worker's ops and errnos are a small set; this only bounds memory). */
const MAX_KINDS = 1000;

interface Kind {
  windowStart: number;
  written: number;
  /** The first denial not written one by one in this window, and how many it stands for. */
  first: TrailEvent | undefined;
  count: number;
}

/** Collapses similar denials; allowed accesses and connections pass unchanged. */
export class DenialCollapser {
  readonly #kinds = new Map<string, Kind>();

  /** Whether counted denials are waiting for their record (see drain). */
  get pending(): boolean {
    for (const kind of this.#kinds.values()) if (kind.count > 0) return true;
    return false;
  }

  /** The events of a batch to write now, in order, with the records of windows that ended before them. */
  filter(events: readonly TrailEvent[]): TrailEvent[] {
    const out: TrailEvent[] = [];
    for (const event of events) {
      if (event.decision !== 'deny') {
        out.push(event);
        continue;
      }
      const key =
        'via' in event ? `${event.op}\0network` : `${event.op}\0${event.errno ?? ''}\0${event.permission}`;
      let kind = this.#kinds.get(key);
      if (kind === undefined || event.time >= kind.windowStart + WINDOW_MS || event.time < kind.windowStart) {
        if (kind !== undefined) out.push(...summary(kind));
        if (kind === undefined && this.#kinds.size >= MAX_KINDS) out.push(...this.drain(Infinity, true));
        kind = { windowStart: event.time, written: 0, first: undefined, count: 0 };
        this.#kinds.set(key, kind);
      }
      if (kind.written < DENIALS_PER_WINDOW) {
        kind.written++;
        out.push(event);
      } else {
        kind.first ??= event;
        kind.count++;
      }
    }
    return out;
  }

  /**
   * The records of counted denials whose window ended by `now` (every one with `all`, e.g. at flush); a
   * window drained early goes on counting from zero.
   */
  drain(now: number, all = false): TrailEvent[] {
    const out: TrailEvent[] = [];
    for (const [key, kind] of this.#kinds) {
      const ended = kind.windowStart + WINDOW_MS <= now;
      if (ended || all) out.push(...summary(kind));
      if (ended) this.#kinds.delete(key);
    }
    return out;
  }
}

/** The one record for a window's counted denials (none if there were none); resets the count. */
function summary(kind: Kind): TrailEvent[] {
  const first = kind.first;
  const count = kind.count;
  kind.first = undefined;
  kind.count = 0;
  return first === undefined ? [] : [{ ...first, similar: count }];
}
