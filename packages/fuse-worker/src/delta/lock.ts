// A FIFO async mutex: namespace mutations of one delta run one at a time.

/**
 * Serializes async critical sections. Invariant: a section never calls `run` again (no re-entrancy), so
 * helpers used inside sections are plain functions.
 */
export class AsyncLock {
  private tail: Promise<void> = Promise.resolve();
  private queued = 0;

  /**
   * No section queued or running: a synchronous section may run now, since nothing can start or resume
   * before it returns (the JS thread is this one).
   */
  get idle(): boolean {
    return this.queued === 0;
  }

  /** Runs `fn` after every section queued before it has settled. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    this.queued++;
    const result = this.tail.then(fn);
    this.tail = result.then(
      () => {
        this.queued--;
      },
      () => {
        this.queued--;
      },
    );
    return result;
  }
}
