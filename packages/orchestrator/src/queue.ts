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

/**
 * The statuses `start` pushes, until the consumer stops or `outer` aborts: then `start`'s signal aborts
 * (closing the queue) and the generator ends once `start`'s loops have. The watch of every adapter.
 */
export async function* runWatch<T>(
  outer: AbortSignal | undefined,
  start: (signal: AbortSignal, queue: StatusQueue<T>) => Promise<unknown>,
): AsyncGenerator<T> {
  const controller = new AbortController();
  const stop = (): void => controller.abort();
  outer?.addEventListener('abort', stop, { once: true });
  if (outer?.aborted === true) stop();
  const queue = new StatusQueue<T>();
  controller.signal.addEventListener('abort', () => queue.close(), { once: true });
  const loops = start(controller.signal, queue);
  try {
    yield* queue;
  } finally {
    stop();
    outer?.removeEventListener('abort', stop);
    await loops;
  }
}
