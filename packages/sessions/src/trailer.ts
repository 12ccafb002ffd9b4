// The end-of-command trailer and the stream scanner that finds it. After each command the shell prints
// `\x1fagentfense:<nonce>:<status>\n` on stdout and on stderr; the nonce is random per command and chosen
// after the command text is known, so nothing the command prints can end its output early. Everything
// before the trailer is the command's output, byte for byte.

/** Printed before the nonce; the printf spelling is in script.ts (TRAILER_FORMAT). */
export const TRAILER_TAG = '\x1fagentfense:';
/** A nonce is 32 lowercase hex digits (128 random bits). */
export const NONCE_PATTERN = /^[0-9a-f]{32}$/;
/** `$?` is 0–255: at most three digits. */
const MAX_STATUS_DIGITS = 3;
const NEWLINE = 0x0a;

/** The bytes that open the trailer of `nonce` (the status and a newline follow). */
export function trailerPrefix(nonce: string): Buffer {
  return Buffer.from(`${TRAILER_TAG}${nonce}:`, 'latin1');
}

/** The full trailer, as the shell prints it (used by tests). */
export function trailerBytes(nonce: string, status: number): Buffer {
  return Buffer.from(`${TRAILER_TAG}${nonce}:${status}\n`, 'latin1');
}

/** A trailer found in a stream: `offset` is how many output bytes (since the last take) precede it. */
export interface TrailerEvent {
  readonly nonce: string;
  readonly status: number;
  readonly offset: number;
}

/** Output taken from a stream. `truncated`: bytes beyond the cap were dropped. */
export interface TakenOutput {
  readonly data: Buffer;
  readonly truncated: boolean;
}

const PREFIX_LENGTH = trailerPrefix('0'.repeat(32)).length;
const EMPTY = Buffer.alloc(0);

/**
 * Collects one stream (stdout or stderr) of the shell. Output is kept up to `maxBytes` (the rest is
 * counted and dropped); trailers of the nonces being watched are removed from the output and recorded as
 * events. Trailers may arrive split across chunks: while any nonce is watched, the last few bytes are held
 * back until the next chunk shows whether they start a trailer.
 */
export class StreamCollector {
  readonly #maxBytes: number;
  #stored: Buffer[] = [];
  #storedBytes = 0;
  /** Output bytes since the last take, dropped ones included. */
  #length = 0;
  #truncated = false;
  /** Unscanned bytes that may be the beginning of a trailer. */
  #held: Buffer = EMPTY;
  readonly #watched = new Map<string, Buffer>();
  #events: TrailerEvent[] = [];

  constructor(options: { maxBytes: number }) {
    this.#maxBytes = options.maxBytes;
  }

  /** Starts looking for the trailer of `nonce` (call before the shell can print it). */
  watch(nonce: string): void {
    this.#watched.set(nonce, trailerPrefix(nonce));
  }

  /** Stops looking for every nonce and forgets their events; held-back bytes become plain output. */
  unwatchAll(): void {
    this.#watched.clear();
    this.#events = [];
    this.#append(this.#held);
    this.#held = EMPTY;
  }

  /** The trailer event of `nonce`, once seen. */
  event(nonce: string): TrailerEvent | undefined {
    return this.#events.find((e) => e.nonce === nonce);
  }

  push(chunk: Buffer): void {
    let buf = this.#held.length === 0 ? chunk : Buffer.concat([this.#held, chunk]);
    this.#held = EMPTY;
    for (;;) {
      if (this.#watched.size === 0) {
        this.#append(buf);
        return;
      }
      const match = this.#earliestPrefix(buf);
      if (match === undefined) {
        // A trailer could start in the last PREFIX_LENGTH - 1 bytes: hold them back.
        const keep = Math.min(buf.length, PREFIX_LENGTH - 1);
        this.#append(buf.subarray(0, buf.length - keep));
        this.#held = Buffer.from(buf.subarray(buf.length - keep));
        return;
      }
      this.#append(buf.subarray(0, match.index));
      const parsed = parseStatus(buf, match.index + PREFIX_LENGTH);
      if (parsed === 'incomplete') {
        this.#held = Buffer.from(buf.subarray(match.index));
        return;
      }
      if (parsed === 'malformed') {
        // Not a trailer after all (the prefix followed by something else): it is output.
        this.#append(buf.subarray(match.index, match.index + PREFIX_LENGTH));
        buf = buf.subarray(match.index + PREFIX_LENGTH);
        continue;
      }
      this.#events.push({ nonce: match.nonce, status: parsed.status, offset: this.#length });
      buf = buf.subarray(parsed.end);
    }
  }

  /** Removes and returns the first `offset` output bytes (the output before a trailer event). */
  take(offset: number): TakenOutput {
    const all = Buffer.concat(this.#stored, this.#storedBytes);
    const data = all.subarray(0, Math.min(offset, all.length));
    const truncated = offset > all.length;
    const rest = offset < all.length ? all.subarray(offset) : EMPTY;
    // Bytes dropped after the cap that belong to the rest are lost; the rest starts again untruncated.
    this.#stored = rest.length === 0 ? [] : [Buffer.from(rest)];
    this.#storedBytes = rest.length;
    this.#length = rest.length;
    this.#truncated = false;
    this.#events = this.#events.map((e) => ({
      ...e,
      offset: Math.min(Math.max(e.offset - offset, 0), rest.length),
    }));
    return { data: Buffer.from(data), truncated };
  }

  /** Everything collected so far, held-back bytes included (the shell has exited). */
  flush(): TakenOutput {
    this.#append(this.#held);
    this.#held = EMPTY;
    const truncated = this.#truncated;
    const { data } = this.take(this.#length);
    return { data, truncated };
  }

  #append(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.#length += bytes.length;
    const room = this.#maxBytes - this.#storedBytes;
    if (bytes.length > room) this.#truncated = true;
    if (room <= 0) return;
    // Copy: callers hand us views of chunks that node may reuse.
    const kept = Buffer.from(bytes.subarray(0, Math.min(room, bytes.length)));
    this.#stored.push(kept);
    this.#storedBytes += kept.length;
  }

  #earliestPrefix(buf: Buffer): { index: number; nonce: string } | undefined {
    let best: { index: number; nonce: string } | undefined;
    for (const [nonce, prefix] of this.#watched) {
      const index = buf.indexOf(prefix);
      if (index !== -1 && (best === undefined || index < best.index)) best = { index, nonce };
    }
    return best;
  }
}

/** Reads `<digits>\n` at `start`. */
function parseStatus(
  buf: Buffer,
  start: number,
): { status: number; end: number } | 'incomplete' | 'malformed' {
  let status = 0;
  for (let i = start; i < buf.length; i += 1) {
    const byte = buf[i] as number;
    if (byte === NEWLINE) return i === start ? 'malformed' : { status, end: i + 1 };
    if (byte < 0x30 || byte > 0x39 || i - start >= MAX_STATUS_DIGITS) return 'malformed';
    status = status * 10 + (byte - 0x30);
  }
  return 'incomplete';
}
