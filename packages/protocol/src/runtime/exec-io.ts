// The part of ExecOptions (runtime.ts) a runtime hands on unchanged to the code that runs the command:
// stdin as bytes, the timeout, the abort signal and the streaming callbacks, each only when given
// (exactOptionalPropertyTypes: an absent option is absent, never `undefined`).
import type { ExecOptions } from '../runtime.js';

/** The I/O and termination options of one exec, as passed on to a runtime's launcher. */
export interface ExecIo {
  readonly stdin?: Uint8Array;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  readonly onStdout?: (chunk: Buffer) => void;
  readonly onStderr?: (chunk: Buffer) => void;
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
  };
}
