// Streaming exec for library users: an async iterable of output chunks in arrival order, plus the final
// result as a promise. Chunks are buffered until read, so a slow reader loses nothing.
import type { ExecResult } from '@agentfense/protocol';

/** One chunk of a command's output: a string (the default) or bytes (`encoding: 'buffer'`). */
export interface ExecChunk<D extends string | Buffer = Buffer> {
  readonly stream: 'stdout' | 'stderr';
  readonly data: D;
}

/** Starts the command with the two chunk callbacks; resolves with its result. */
export type StartExec<D extends string | Buffer = Buffer, R = ExecResult> = (
  onStdout: (chunk: D) => void,
  onStderr: (chunk: D) => void,
) => Promise<R>;

export class ExecStream<D extends string | Buffer = Buffer, R = ExecResult> implements AsyncIterable<
  ExecChunk<D>
> {
  /** The command's result (exit code, full stdout/stderr, timing); rejects when the exec fails. */
  readonly result: Promise<R>;
  readonly #queue: ExecChunk<D>[] = [];
  #done = false;
  #wake: (() => void) | undefined;

  constructor(start: StartExec<D, R>) {
    const push = (stream: ExecChunk['stream']) => (data: D) => {
      this.#queue.push({ stream, data });
      this.#notify();
    };
    this.result = start(push('stdout'), push('stderr')).finally(() => {
      this.#done = true;
      this.#notify();
    });
    // Iteration reports a failure through the iterator; keep an unobserved `result` from crashing the process.
    this.result.catch(() => undefined);
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ExecChunk<D>> {
    for (;;) {
      const chunk = this.#queue.shift();
      if (chunk !== undefined) {
        yield chunk;
        continue;
      }
      if (this.#done) {
        await this.result; // throws the exec's error, if any
        return;
      }
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }
}
