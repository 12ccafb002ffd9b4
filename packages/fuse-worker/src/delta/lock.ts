// A FIFO async mutex: namespace mutations of one delta run one at a time.

/**
 * Serializes async critical sections. Invariant: a section never calls `run` again (no re-entrancy), so
 * helpers used inside sections are plain functions.
 */
export class AsyncLock {
  private tail: Promise<void> = Promise.resolve();

  /** Runs `fn` after every section queued before it has settled. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
