// Gives memory back when the worker goes quiet. One idle worker runs per sandbox, so what it keeps resident
// after a burst of work (or after its own start-up and mount) is multiplied by the number of sandboxes. V8
// sizes its young generation for the last burst and keeps it; a "last resort" collection (the one V8 runs
// under memory pressure) also shrinks it back once the burst is over: ~1.5 MiB of the idle worker's ~12 MiB
// (docs/decisions.md, "Quiet workers collect and trim their heap"). One takes ~1 ms on the worker's small
// heap, and a few run per quiet period, so a steady stream of requests never pays for them.
//
// What Node 20 (V8 11.3) does with the options below is a young-generation collection (a scavenge), not a
// full one: its gc extension recognizes only `type: 'minor'` and `execution: 'async'` in an options object
// and treats any other object as the old truthy `gc(true)`, which meant "minor". The young generation still
// shrinks (what the figures above measured), but the old generation's garbage after a walk stays until V8's
// own memory reducer runs, ~10 s or more after the burst (bench/README.md, "Memory per known entry"). The options are
// those of newer V8 releases' extension (not measured here on a newer Node).

/** A memory-reducing garbage collection (on Node 20 a scavenge only: see the head of the file). */
export type Collect = () => void;

type ExposedGc = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * The collector `--expose-gc` put on the global object (spawnWorker passes that flag); undefined when the
 * flag is absent (then nothing is trimmed).
 */
export function takeCollector(): Collect | undefined {
  const gc = (globalThis as { gc?: ExposedGc }).gc;
  if (typeof gc !== 'function') return undefined;
  return () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/** Quiet ticks in a row that each run one collection. */
const TRIM_TICKS = 5;

/**
 * Collects at each of the first TRIM_TICKS ticks that see no new activity, after each period of activity.
 * `activity` is any counter that moves when the worker works (FUSE ops and control requests). Several
 * ticks, not several collections at once: V8 shrinks the young generation only in a collection that finds
 * the recent allocation rate low, and it measures that rate over the last few seconds, so right after a
 * burst nothing shrinks (measured: five collections 100 ms apart shrank nothing; one per second took it
 * from 2 x 1 MiB to 2 x 512 KiB after ~3.5 s, then to one page).
 */
export class IdleTrim {
  readonly #collect: Collect;
  readonly #activity: () => number;
  #seen: number;
  #quietTicks = 0;

  constructor(collect: Collect, activity: () => number) {
    this.#collect = collect;
    this.#activity = activity;
    this.#seen = activity();
  }

  /** Call periodically (the health timer). */
  tick(): void {
    const now = this.#activity();
    if (now !== this.#seen) {
      this.#seen = now;
      this.#quietTicks = 0;
    } else if (++this.#quietTicks <= TRIM_TICKS) {
      this.#collect();
    }
  }
}
