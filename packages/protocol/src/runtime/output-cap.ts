// The cap on a buffered command's output, shared by both runtimes: output is held in memory until the
// command ends, so a command printing without end must be stopped, not buffered.
import { InvalidArgumentError } from '../errors.js';

/** Default cap on each of stdout/stderr of a buffered command (runtime option `maxOutputBytes`). */
export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/** The largest cap a runtime accepts: two streams of it per command stay well inside a worker's heap. */
export const MAX_OUTPUT_BYTES_LIMIT = 32 * 1024 * 1024;

/** The runtime option `maxOutputBytes`, defaulted; throws unless it is an integer in 1..MAX_OUTPUT_BYTES_LIMIT. */
export function checkMaxOutputBytes(value: number | undefined): number {
  const bytes = value ?? DEFAULT_MAX_OUTPUT_BYTES;
  if (!Number.isSafeInteger(bytes) || bytes < 1 || bytes > MAX_OUTPUT_BYTES_LIMIT) {
    throw new InvalidArgumentError(`maxOutputBytes must be an integer in 1..${MAX_OUTPUT_BYTES_LIMIT}`);
  }
  return bytes;
}

/**
 * One stream's output, kept up to `cap` bytes. What does not fit is dropped and the output marked
 * truncated: the runtime then stops the command (output that exactly fills the cap is not truncated).
 */
export class CappedOutput {
  readonly #cap: number;
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #truncated = false;

  constructor(cap: number) {
    this.#cap = cap;
  }

  /** True once some output did not fit (and was dropped). */
  get truncated(): boolean {
    return this.#truncated;
  }

  /** Keeps what fits of `chunk` and returns it (empty once the cap is reached). */
  push(chunk: Buffer): Buffer {
    const room = this.#cap - this.#size;
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (kept.length < chunk.length) this.#truncated = true;
    if (kept.length > 0) {
      this.#chunks.push(kept);
      this.#size += kept.length;
    }
    return kept;
  }

  /** Everything kept, in order. */
  toBuffer(): Buffer {
    return Buffer.concat(this.#chunks, this.#size);
  }
}
