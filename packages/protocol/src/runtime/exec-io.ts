// The part of ExecOptions (runtime.ts) a runtime hands on unchanged to the code that runs the command:
// stdin as bytes, the timeout, the abort signal, the streaming callbacks and whether the output is kept,
// each only when given (exactOptionalPropertyTypes: an absent option is absent, never `undefined`).
import type { ExecOptions } from '../runtime.js';
import type { OutputCallback } from './output-stream.js';

/** The I/O and termination options of one exec, as passed on to a runtime's launcher. */
export interface ExecIo {
  readonly stdin?: Uint8Array;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  readonly onStdout?: OutputCallback;
  readonly onStderr?: OutputCallback;
  /** false: nothing is kept for the result and no cap applies (ExecOptions.keepOutput). */
  readonly keepOutput?: boolean;
}

/** Picks the ExecIo of `options`; a string stdin becomes its UTF-8 bytes. */
export function execIo(options: ExecOptions): ExecIo {
  const stdin = typeof options.stdin === 'string' ? Buffer.from(options.stdin) : options.stdin;
  return {
    ...(stdin === undefined ? {} : { stdin }),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    ...(options.onStdout === undefined ? {} : { onStdout: options.onStdout }),
    ...(options.onStderr === undefined ? {} : { onStderr: options.onStderr }),
    ...(options.keepOutput === undefined ? {} : { keepOutput: options.keepOutput }),
  };
}
