// Per-operation counters and latency percentiles for the worker's `stats` request. Latencies go into
// log2 buckets of microseconds: constant memory, O(1) per op, percentiles accurate to a factor of 2^(1/4).

const SUB_BUCKETS = 4; // quarter-octave resolution
const BUCKETS = 40 * SUB_BUCKETS; // up to 2^40 µs

interface OpCounters {
  count: number;
  errors: number;
  readonly histogram: Uint32Array;
}

/** A summary of one op kind. */
export interface OpSummary {
  readonly count: number;
  readonly errors: number;
  readonly p50Us: number;
  readonly p99Us: number;
}

/** Collects counts, error counts and latency histograms per op name. */
export class OpStats {
  readonly #ops = new Map<string, OpCounters>();

  /** Records one finished op that took `micros` microseconds. */
  record(op: string, micros: number, failed: boolean): void {
    let counters = this.#ops.get(op);
    if (counters === undefined) {
      counters = { count: 0, errors: 0, histogram: new Uint32Array(BUCKETS) };
      this.#ops.set(op, counters);
    }
    counters.count++;
    if (failed) counters.errors++;
    const bucket = micros <= 1 ? 0 : Math.min(BUCKETS - 1, Math.floor(Math.log2(micros) * SUB_BUCKETS));
    counters.histogram[bucket] = (counters.histogram[bucket] ?? 0) + 1;
  }

  /** Count, errors, p50 and p99 (µs) for every op seen. */
  summary(): Record<string, OpSummary> {
    const out: Record<string, OpSummary> = {};
    for (const [op, c] of this.#ops) {
      out[op] = { count: c.count, errors: c.errors, p50Us: percentile(c, 0.5), p99Us: percentile(c, 0.99) };
    }
    return out;
  }

  /** Total op count (all kinds). */
  total(): number {
    let n = 0;
    for (const c of this.#ops.values()) n += c.count;
    return n;
  }
}

function percentile(c: OpCounters, q: number): number {
  const rank = Math.ceil(c.count * q);
  let seen = 0;
  for (let i = 0; i < c.histogram.length; i++) {
    seen += c.histogram[i] ?? 0;
    if (seen >= rank) return Math.round(2 ** ((i + 1) / SUB_BUCKETS));
  }
  return 0;
}
