// Cooperative yielding for long synchronous loops on the worker's only JS thread.
import { setImmediate as nextTurn } from 'node:timers/promises';

/** How long a loop may run before it lets the event loop serve other work (FUSE requests, pings). */
export const YIELD_EVERY_MS = 5;

/**
 * `await yielder.maybe()` inside a loop: resolves at once (a microtask) until YIELD_EVERY_MS have passed
 * since the last yield, then waits one event-loop turn. Awaiting a resolved promise alone never lets
 * I/O callbacks run, which is how a 200k-file diff once missed the control plane's health pings.
 */
export class Yielder {
  #last = performance.now();

  async maybe(): Promise<void> {
    const now = performance.now();
    if (now - this.#last < YIELD_EVERY_MS) return;
    await nextTurn();
    this.#last = performance.now();
  }
}
