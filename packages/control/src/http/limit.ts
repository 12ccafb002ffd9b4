// A counting semaphore: at most `limit` tasks run at once, the rest wait in arrival order.

/** Runs async tasks with bounded concurrency (FIFO). */
export class ConcurrencyLimit {
  readonly #limit: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1)
      throw new RangeError(`limit must be a positive integer, got ${limit}`);
    this.#limit = limit;
  }

  /** Tasks running now / waiting for a slot. */
  get running(): number {
    return this.#running;
  }
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Runs `task` once a slot is free; the slot is released however the task ends. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running += 1;
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      // The slot passes straight to the next waiter; only when none waits does the count drop.
      if (next === undefined) this.#running -= 1;
      else next();
    }
  }
}
