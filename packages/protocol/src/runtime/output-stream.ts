// One output stream of a running command, taken the same way by every runtime: kept for the result up
// to the cap (past it the command is stopped), and handed to the streaming callback as it arrives, with
// back-pressure: a callback that returns a promise keeps the stream paused until the promise settles, so
// the output waits in the command's pipe and the command, once the pipe is full, waits too, as it would
// writing to a terminal nobody reads.
import { CappedOutput } from './output-cap.js';

/**
 * A streaming consumer of output. A returned promise (any thenable) means "no more until it settles";
 * any other value is ignored (callbacks that return what they happen to compute keep working).
 */
export type OutputCallback = (chunk: Buffer) => unknown;

export interface CollectOutputOptions {
  /** Bytes kept for the result; the chunk that passes it stops the command (`onOverflow`). */
  readonly cap: number;
  /**
   * false: nothing is kept and no cap applies, the callback takes all of it (a streaming consumer that
   * does not need the result's copy: its memory is then bounded by the back-pressure alone).
   */
  readonly keep?: boolean;
  readonly callback?: OutputCallback | undefined;
  /** The cap overflowed: stop the command. Called once. */
  readonly onOverflow: () => void;
  /** The callback threw or its promise rejected (the output still flows; the caller logs it). */
  readonly onCallbackError: (err: unknown) => void;
}

/** What was kept of one stream. */
export interface CollectedOutput {
  /** Everything kept, in order (empty when nothing is kept). */
  toBuffer(): Buffer;
  /** Output past the cap was dropped (and the command stopped). */
  readonly truncated: boolean;
}

const NOTHING = Buffer.alloc(0);

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

/** Takes `stream`'s output as described above. Attach before any output can flow. */
export function collectOutput(stream: NodeJS.ReadableStream, options: CollectOutputOptions): CollectedOutput {
  const kept = options.keep === false ? null : new CappedOutput(options.cap);
  const { callback } = options;
  let waiting = 0;
  const settled = (): void => {
    if (--waiting === 0) stream.resume();
  };
  stream.on('data', (chunk: Buffer) => {
    let handed = chunk;
    if (kept !== null) {
      if (kept.truncated) return;
      handed = kept.push(chunk);
      if (kept.truncated) options.onOverflow();
    }
    if (callback === undefined || handed.length === 0) return;
    let result: unknown;
    try {
      result = callback(handed);
    } catch (err) {
      options.onCallbackError(err);
      return;
    }
    if (!isThenable(result)) return;
    waiting++;
    stream.pause();
    result.then(settled, (err: unknown) => {
      options.onCallbackError(err);
      settled();
    });
  });
  return {
    toBuffer: () => kept?.toBuffer() ?? NOTHING,
    get truncated() {
      return kept?.truncated ?? false;
    },
  };
}
