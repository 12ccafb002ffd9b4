// A push-to-pull bridge: the watch's callbacks push statuses, the consumer's `for await` pulls them.
// Statuses are small and a consumer that falls behind only delays its own view, so the queue is unbounded.

export class StatusQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: ((result: IteratorResult<T>) => void) | undefined;
  private closed = false;

  push(...values: T[]): void {
    for (const value of values) {
      if (this.closed) return;
      const waiter = this.waiter;
      if (waiter !== undefined) {
        this.waiter = undefined;
        waiter({ value, done: false });
      } else this.items.push(value);
    }
  }

  close(): void {
    this.closed = true;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const value = this.items.shift();
        if (value !== undefined) return Promise.resolve({ value, done: false });
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => (this.waiter = resolve));
      },
      return: () => {
        this.close();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
