// The library's spare sandboxes (docs/decisions.md "The library's front door shares one control plane per
// data directory"): an agent that makes a fresh sandbox per task calls fromLocal with the same directory and
// options again and again, and each call pays create → start → first exec (a FUSE mount, the runtime's start,
// the launcher). So once a shared control plane has seen the same request twice, destroying a sandbox of it
// starts one spare with exactly those options (sandboxes/spare.ts), and the next identical call takes it. One
// spare per plane; it goes with the plane (closed when idle, before the process exits). Requests whose
// sandbox would differ from a fresh one in anything but its start time never get one: an expiry (counted from
// creation) or a network policy (a policy point of its own).
import process from 'node:process';
import type { ControlPlane } from '../control-plane.js';
import { SpareSandbox, spareKey } from '../sandboxes/spare.js';
import type { SpareSpec, TakenSandbox } from '../sandboxes/spare.js';
import { libraryIdleMs } from './shared-planes.js';

/** Turns the library's spares off (`0`); on otherwise. */
export const LIBRARY_SPARE_ENV = 'AGENTFENSE_LIBRARY_SPARE';

/** Requests counted per plane at most (the oldest are forgotten): an agent repeats one or a few. */
const MAX_KINDS = 64;

/** Calls of a kind before destroying one of them starts a spare: a request seen once may not repeat. */
const REPEATS_BEFORE_SPARE = 2;

interface PlaneSpares {
  readonly spare: SpareSandbox;
  /** Requests by spareKey, with how many times each was made. */
  readonly seen: Map<string, number>;
}

/** Whether a request may be served by a spare at all. */
function spareable(spec: SpareSpec): boolean {
  const { network, expiresIn } = spec.options;
  return expiresIn === undefined && (network === undefined || network === false);
}

export class LibrarySpares {
  readonly #planes = new WeakMap<ControlPlane, PlaneSpares>();

  /** The spare made for exactly `spec`, now the caller's; undefined when there is none. Counts the request. */
  take(plane: ControlPlane, spec: SpareSpec): Promise<TakenSandbox | undefined> {
    if (!spareable(spec)) return Promise.resolve(undefined);
    const state = this.#state(plane);
    const key = spareKey(spec);
    const count = (state.seen.get(key) ?? 0) + 1;
    state.seen.delete(key);
    state.seen.set(key, count);
    if (state.seen.size > MAX_KINDS) state.seen.delete(state.seen.keys().next().value as string);
    return state.spare.take(spec);
  }

  /**
   * A sandbox of `spec` was destroyed: when that request repeats, start a spare for the next one, in the
   * background. Nothing when spares are off (AGENTFENSE_LIBRARY_SPARE=0), when planes close with their
   * last sandbox (AGENTFENSE_LIBRARY_IDLE=0) or when `plane` is closing.
   */
  finished(plane: ControlPlane, spec: SpareSpec): void {
    const state = this.#planes.get(plane);
    if (state === undefined || plane.closed || process.env[LIBRARY_SPARE_ENV] === '0') return;
    if (libraryIdleMs() === 0) return;
    if (!spareable(spec) || (state.seen.get(spareKey(spec)) ?? 0) < REPEATS_BEFORE_SPARE) return;
    state.spare.prepare(spec);
  }

  /** Destroys `plane`'s spare (before the plane closes) and forgets the plane. */
  async close(plane: ControlPlane): Promise<void> {
    const state = this.#planes.get(plane);
    this.#planes.delete(plane);
    await state?.spare.close();
  }

  #state(plane: ControlPlane): PlaneSpares {
    let state = this.#planes.get(plane);
    if (state === undefined)
      this.#planes.set(plane, (state = { spare: new SpareSandbox(plane), seen: new Map() }));
    return state;
  }
}
