// Per-key serialization of async operations (one sandbox's lifecycle operations run one at a time).

/** Runs operations on the same key one after another; different keys run concurrently. */
export class KeyedLock {
  readonly #tails = new Map<string, Promise<unknown>>();

  /** Runs `fn` after every operation already queued on `key` (whether they succeeded or not). */
  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, settled);
    void settled.then(() => {
      if (this.#tails.get(key) === settled) this.#tails.delete(key);
    });
    return next;
  }

  /** Settles once every operation queued now has. */
  async idle(): Promise<void> {
    await Promise.all([...this.#tails.values()]);
  }
}
