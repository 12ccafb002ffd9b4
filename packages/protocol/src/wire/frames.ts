// Length-prefixed framing: every frame is a 4-byte big-endian payload length followed by the payload.
// The maximum size is enforced when encoding (a local bug surfaces at the sender) and when decoding
// (a hostile or broken peer cannot make us buffer gigabytes: we reject as soon as the header is read).

import { InternalError, InvalidArgumentError, ProtocolError } from '../errors.js';

/** Bytes of the length prefix in front of every frame. */
export const FRAME_HEADER_BYTES = 4;

/** Default largest payload: big enough for a readFile of a large source file, small enough to buffer. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

/** The largest payload a 4-byte length prefix can describe. */
const MAX_REPRESENTABLE_BYTES = 0xffff_ffff;

/** Options shared by the framing functions. */
export interface FrameOptions {
  /** Largest payload in bytes (header excluded). Default DEFAULT_MAX_FRAME_BYTES. */
  readonly maxFrameBytes?: number;
}

/** Validates `maxFrameBytes` once, so a typo fails at construction rather than on the first frame. */
export function resolveMaxFrameBytes(options: FrameOptions = {}): number {
  const max = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  if (!Number.isSafeInteger(max) || max < 1 || max > MAX_REPRESENTABLE_BYTES) {
    throw new InvalidArgumentError(
      `maxFrameBytes must be an integer in 1..${MAX_REPRESENTABLE_BYTES} (got ${max})`,
    );
  }
  return max;
}

/** Prefixes `payload` with its length; throws ProtocolError if it exceeds the maximum frame size. */
export function encodeFrame(payload: Uint8Array, options: FrameOptions = {}): Buffer {
  const max = resolveMaxFrameBytes(options);
  if (payload.byteLength > max) {
    throw new ProtocolError(`frame of ${payload.byteLength} bytes exceeds the maximum of ${max} bytes`, {
      details: { frameBytes: payload.byteLength, maxFrameBytes: max },
    });
  }
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.byteLength);
  frame.writeUInt32BE(payload.byteLength, 0);
  frame.set(payload, FRAME_HEADER_BYTES);
  return frame;
}

/**
 * Reassembles frames from a byte stream cut at arbitrary points (a header split across chunks, many frames
 * in one chunk, one frame over many chunks). Once it has thrown it stays failed: after a bad header the
 * stream position is lost and nothing later in it can be trusted.
 */
export class FrameDecoder {
  readonly #max: number;
  /** Received bytes not yet returned as frames; concatenated only when a frame is complete. */
  #chunks: Buffer[] = [];
  #buffered = 0;
  /** Payload length of the frame being received, once its header has been read. */
  #expected: number | undefined;
  #failure: ProtocolError | undefined;

  constructor(options: FrameOptions = {}) {
    this.#max = resolveMaxFrameBytes(options);
  }

  /** Bytes received but not yet returned (a partial header or payload). */
  get bufferedBytes(): number {
    // The header of a frame in progress is already parsed, but it has not been returned either.
    return this.#buffered + (this.#expected === undefined ? 0 : FRAME_HEADER_BYTES);
  }

  /**
   * Feeds received bytes; returns the payloads of every frame they complete, in order. The decoder keeps
   * views into `chunk` (no copy on the hot path), so the caller must not reuse its memory afterwards.
   */
  push(chunk: Uint8Array): Buffer[] {
    if (this.#failure !== undefined) throw this.#failure;
    if (chunk.byteLength > 0) {
      this.#chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      this.#buffered += chunk.byteLength;
    }
    const frames: Buffer[] = [];
    for (;;) {
      if (this.#expected === undefined) {
        if (this.#buffered < FRAME_HEADER_BYTES) break;
        const length = this.#take(FRAME_HEADER_BYTES).readUInt32BE(0);
        if (length > this.#max) {
          this.#failure = new ProtocolError(
            `peer announced a frame of ${length} bytes, more than the maximum of ${this.#max} bytes`,
            { details: { frameBytes: length, maxFrameBytes: this.#max } },
          );
          this.#chunks = [];
          this.#buffered = 0;
          throw this.#failure;
        }
        this.#expected = length;
      }
      if (this.#buffered < this.#expected) break;
      frames.push(this.#take(this.#expected));
      this.#expected = undefined;
    }
    return frames;
  }

  /** Removes and returns the first `n` buffered bytes (a view when they sit in one chunk, else a copy). */
  #take(n: number): Buffer {
    this.#buffered -= n;
    const first = this.#chunks[0];
    if (first !== undefined && first.byteLength >= n) {
      if (first.byteLength === n) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.#chunks[0];
      if (chunk === undefined) throw new InternalError('FrameDecoder: fewer bytes buffered than counted');
      const used = Math.min(chunk.byteLength, n - filled);
      out.set(chunk.subarray(0, used), filled);
      filled += used;
      if (used === chunk.byteLength) this.#chunks.shift();
      else this.#chunks[0] = chunk.subarray(used);
    }
    return out;
  }
}
