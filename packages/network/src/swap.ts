// Exact byte replacement of tokens in a stream: placeholders by values on the way to a bound host, and
// values by placeholders on the way back (a server that echoes a key gives the agent only the
// placeholder). A token split across chunks is still found: the last (longest token - 1) bytes of a
// chunk are held back until the next one shows whether they start a token.
import { Transform } from 'node:stream';
import type { TransformCallback } from 'node:stream';

export interface Swap {
  readonly from: Buffer;
  readonly to: Buffer;
  /** Told of each replacement (audit). */
  readonly onUse?: () => void;
}

/** The earliest occurrence of any token at or after `start`. */
function nextMatch(data: Buffer, swaps: readonly Swap[], start: number): { at: number; swap: Swap } | null {
  let best: { at: number; swap: Swap } | null = null;
  for (const swap of swaps) {
    const at = data.indexOf(swap.from, start);
    if (at !== -1 && (best === null || at < best.at)) best = { at, swap };
  }
  return best;
}

/**
 * Replaces every whole token in `data`; returns the output and how many bytes at the end were kept
 * back (`final`: none, the data is complete).
 */
export function swapBytes(
  data: Buffer,
  swaps: readonly Swap[],
  final: boolean,
): { out: Buffer; kept: number } {
  const longest = Math.max(0, ...swaps.map((s) => s.from.length));
  const parts: Buffer[] = [];
  let p = 0;
  for (let m = nextMatch(data, swaps, 0); m !== null; m = nextMatch(data, swaps, p)) {
    parts.push(data.subarray(p, m.at), m.swap.to);
    m.swap.onUse?.();
    p = m.at + m.swap.from.length;
  }
  const keepFrom = final ? data.length : Math.max(p, data.length - Math.max(0, longest - 1));
  parts.push(data.subarray(p, keepFrom));
  return { out: Buffer.concat(parts), kept: data.length - keepFrom };
}

/** Replaces strings in a header value or URL (all occurrences). */
export function swapText(text: string, swaps: readonly Swap[]): string {
  const bytes = Buffer.from(text, 'latin1');
  return swapBytes(bytes, swaps, true).out.toString('latin1');
}

/** A stream that replaces tokens with a bounded window (the longest token). */
export class SwapStream extends Transform {
  readonly #swaps: readonly Swap[];
  #carry = Buffer.alloc(0);

  constructor(swaps: readonly Swap[]) {
    super();
    this.#swaps = swaps;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const data = this.#carry.length === 0 ? chunk : Buffer.concat([this.#carry, chunk]);
    const { out, kept } = swapBytes(data, this.#swaps, false);
    this.#carry = Buffer.from(data.subarray(data.length - kept));
    if (out.length > 0) this.push(out);
    done();
  }

  override _flush(done: TransformCallback): void {
    const { out } = swapBytes(this.#carry, this.#swaps, true);
    if (out.length > 0) this.push(out);
    done();
  }
}
