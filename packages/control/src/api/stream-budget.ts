// Back-pressure for every stream the servers send (ExecStream and SessionExecStream over gRPC, exec/stream
// over HTTP, file downloads on both faces). What a stream has handed to its transport and its client has
// not taken yet is bounded per stream and across the server: past either bound the source waits (the
// command blocks on its output pipe, the file is not read further). A stream whose client takes nothing
// for `stallMs` while bytes wait is reported stalled, and its owner ends it with an error: a client that
// never reads holds a bounded amount of memory for a bounded time.
import { InvalidArgumentError, TimeoutError } from '@agentfense/protocol';

/** Bounds of the streams of one server process. */
export interface StreamLimits {
  /** Bytes one stream may have outstanding (handed over, not yet taken) before its source waits. */
  readonly streamBytes: number;
  /**
   * Bytes all streams together may have outstanding. Past it a stream with something outstanding waits;
   * one with nothing may still hand over a chunk, so no stream starves: the total stays within this plus
   * one chunk per open stream.
   */
  readonly totalBytes: number;
  /** A stream whose client took nothing for this long, with bytes waiting, is stalled. */
  readonly stallMs: number;
}

/** Default per-stream bound: a few messages beyond what the transport's own windows hold. */
export const DEFAULT_STREAM_BYTES = 128 * 1024;
/** Default bound across a server's streams. */
export const DEFAULT_TOTAL_STREAM_BYTES = 64 * 1024 * 1024;
/** Default time a client may take nothing while its stream waits, before the stream is ended. */
export const DEFAULT_STREAM_STALL_MS = 60_000;
/**
 * After a stall, how long the error that ends a stream may wait behind the bytes its client has not
 * taken before the connection or call is dropped: a client that resumes within it still reads why.
 */
export function stallGraceMs(limits: StreamLimits): number {
  return Math.max(limits.stallMs, 5_000);
}

/** The stall time from `AGENTFENSE_STREAM_STALL_SECONDS` (a positive number), else the default. */
export function stallMsFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const value = env['AGENTFENSE_STREAM_STALL_SECONDS'];
  if (value === undefined || value === '') return DEFAULT_STREAM_STALL_MS;
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new InvalidArgumentError(
      `AGENTFENSE_STREAM_STALL_SECONDS must be a positive number of seconds, got ${JSON.stringify(value)}`,
    );
  }
  return Math.round(seconds * 1000);
}

/** What a stream's owner learns when its client stopped taking what it sends. */
export interface Stall {
  /** How long the client has taken nothing. */
  readonly ms: number;
  /** Bytes waiting for it. */
  readonly bytes: number;
}

/** The error a stalled stream ends with. */
export function stallError(stall: Stall, stops?: string): TimeoutError {
  const seconds = Math.round(stall.ms / 100) / 10;
  return new TimeoutError(
    `the client read nothing of this stream for ${seconds} s while ${stall.bytes} bytes waited for it: ` +
      `the stream is ended${stops === undefined ? '' : ` and ${stops}`} (read the stream as it arrives)`,
    { details: { stalledMs: stall.ms, waitingBytes: stall.bytes } },
  );
}

/** The streams of one server (both faces of `serve` share one). */
export class StreamBudget {
  readonly limits: StreamLimits;
  readonly #open = new Set<PacedStream>();
  /** Streams whose source waits for room (woken as room is made). */
  readonly #waiting = new Set<PacedStream>();
  #total = 0;
  #sweeper: NodeJS.Timeout | undefined;

  constructor(limits: Partial<StreamLimits> = {}) {
    this.limits = {
      streamBytes: limits.streamBytes ?? DEFAULT_STREAM_BYTES,
      totalBytes: limits.totalBytes ?? DEFAULT_TOTAL_STREAM_BYTES,
      stallMs: limits.stallMs ?? stallMsFromEnv(),
    };
  }

  /** Bytes outstanding across the server's streams now. */
  get outstanding(): number {
    return this.#total;
  }

  /**
   * A new stream. `onStall` is called once if its client stops taking what it sends (the owner then ends
   * it); `streamBytes` lowers this stream's own bound (a download needs no more than a chunk).
   */
  open(options: { readonly onStall: (stall: Stall) => void; readonly streamBytes?: number }): PacedStream {
    const stream = new PacedStream({
      budget: this,
      limit: Math.min(options.streamBytes ?? this.limits.streamBytes, this.limits.streamBytes),
      onStall: options.onStall,
    });
    this.#open.add(stream);
    this.#sweeper ??= setInterval(() => this.#sweep(), Math.min(1000, this.limits.stallMs / 4)).unref();
    return stream;
  }

  /** Accounting from PacedStream: bytes handed over (positive) or taken or dropped (negative). */
  adjust(bytes: number): void {
    this.#total += bytes;
    if (bytes < 0) for (const stream of [...this.#waiting]) stream.wake();
  }

  /** From PacedStream: its source waits (true) or goes on (false). */
  waits(stream: PacedStream, waiting: boolean): void {
    if (waiting) this.#waiting.add(stream);
    else this.#waiting.delete(stream);
  }

  /** Whether a stream with `outstanding` bytes may hand over more. */
  allows(outstanding: number, limit: number): boolean {
    if (outstanding >= limit) return false;
    return outstanding === 0 || this.#total < this.limits.totalBytes;
  }

  /** From PacedStream.close. */
  closed(stream: PacedStream): void {
    this.#open.delete(stream);
    if (this.#open.size === 0 && this.#sweeper !== undefined) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
  }

  #sweep(): void {
    const now = Date.now();
    for (const stream of [...this.#open]) {
      if (stream.idleSince !== undefined && now - stream.idleSince >= this.limits.stallMs) stream.stall(now);
    }
  }
}

/** One stream's side of the budget. */
export class PacedStream {
  readonly #budget: StreamBudget;
  readonly #limit: number;
  readonly #onStall: (stall: Stall) => void;
  #outstanding = 0;
  /** The source's wait, while it waits (every write meanwhile returns the same one). */
  #wait: { readonly promise: Promise<void>; readonly resolve: () => void } | undefined;
  #closed = false;
  /** Since when bytes have waited without the client taking any (undefined: nothing waits). */
  idleSince: number | undefined;

  constructor(options: { budget: StreamBudget; limit: number; onStall: (stall: Stall) => void }) {
    this.#budget = options.budget;
    this.#limit = options.limit;
    this.#onStall = options.onStall;
  }

  /** Bytes handed over and not yet taken. */
  get outstanding(): number {
    return this.#outstanding;
  }

  /**
   * Hands `bytes` over through `send`, which writes them to the transport and calls `taken` once the
   * transport has passed them on. Returns undefined when the source may go on at once, else a promise
   * that resolves once it may (or once the stream is closed).
   */
  write(bytes: number, send: (taken: () => void) => void): Promise<void> | undefined {
    if (this.#closed) return undefined;
    this.#outstanding += bytes;
    this.#budget.adjust(bytes);
    this.idleSince ??= Date.now();
    let done = false;
    send(() => {
      if (done) return;
      done = true;
      this.#taken(bytes);
    });
    if (this.#wait !== undefined) return this.#wait.promise;
    if (this.#budget.allows(this.#outstanding, this.#limit)) return undefined;
    let resolve!: () => void;
    const promise = new Promise<void>((done) => (resolve = done));
    this.#wait = { promise, resolve };
    this.#budget.waits(this, true);
    return promise;
  }

  /** Stops accounting (the stream ended, or its transport is gone); a waiting source goes on. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#budget.adjust(-this.#outstanding);
    this.#outstanding = 0;
    this.idleSince = undefined;
    this.#budget.closed(this);
    this.#release();
  }

  /** From the budget: room may have been made. */
  wake(): void {
    if (this.#wait !== undefined && this.#budget.allows(this.#outstanding, this.#limit)) this.#release();
  }

  /** From the budget: its client took nothing for too long (or the server is closing). Once. */
  stall(now: number): void {
    if (this.#closed) return;
    const stall = { ms: now - (this.idleSince ?? now), bytes: this.#outstanding };
    this.close();
    this.#onStall(stall);
  }

  #taken(bytes: number): void {
    if (this.#closed) return;
    this.#outstanding -= bytes;
    this.idleSince = this.#outstanding > 0 ? Date.now() : undefined;
    this.#budget.adjust(-bytes);
    this.wake();
  }

  #release(): void {
    const wait = this.#wait;
    this.#wait = undefined;
    this.#budget.waits(this, false);
    wait?.resolve();
  }
}
