// A server-streaming call written with back-pressure (api/stream-budget.ts): each message goes out
// through grpc-js's write callback, which runs once HTTP/2 has taken its bytes (within the client's
// flow-control window), so the source waits while the client does not read. A client that takes nothing
// for the stall time has its call ended with DEADLINE_EXCEEDED saying so; since that status can only
// follow the messages the client has not taken, the call is reset after a grace if it is still open,
// which frees them.
import { constants as http2 } from 'node:http2';
import type { ServerWritableStream } from '@grpc/grpc-js';
import { stallError, stallGraceMs, type StreamBudget } from '../api/stream-budget.js';

export interface PacedCall<Res> {
  /** Sends `message`, `bytes` long on the wire; a returned promise: wait for it before sending more. */
  send(message: Res, bytes: number): Promise<void> | undefined;
  /** Aborts when the client stopped reading; its reason is the error to end the call with. */
  readonly stalled: AbortSignal;
  /** The call is over: stop accounting. */
  close(): void;
}

export interface PacedCallOptions {
  readonly streams: StreamBudget;
  /** Aborts when the call is cancelled or the server shuts down: a waiting source goes on (and ends). */
  readonly signal: AbortSignal;
  /** What is stopped with the stream, for the error ("its command is stopped"). */
  readonly stops?: string;
  readonly streamBytes?: number;
}

export function pacedCall<Res>(
  call: ServerWritableStream<unknown, Res>,
  options: PacedCallOptions,
): PacedCall<Res> {
  const stalled = new AbortController();
  const grace = stallGraceMs(options.streams.limits);
  const paced = options.streams.open({
    ...(options.streamBytes === undefined ? {} : { streamBytes: options.streamBytes }),
    onStall: (stall) => {
      stalled.abort(stallError(stall, options.stops));
      setTimeout(() => resetIfOpen(call), grace).unref();
    },
  });
  const close = (): void => paced.close();
  options.signal.addEventListener('abort', close, { once: true });
  return {
    send: (message, bytes) =>
      paced.write(bytes, (taken) => {
        if (call.cancelled || call.writableEnded) return taken();
        call.write(message, () => taken());
      }),
    stalled: stalled.signal,
    close: () => {
      options.signal.removeEventListener('abort', close);
      close();
    },
  };
}

/**
 * Resets the HTTP/2 stream under a grpc-js server call unless it has closed. grpc-js has no public way to
 * drop a call whose client stopped reading (its status waits behind the unsent messages); it keeps the
 * stream as `call.call.stream` (1.14). If that ever changes the call stays until its client reads or
 * goes away, holding what the budget let it hold (test/security/stream-backpressure.test.ts notices).
 */
function resetIfOpen(call: ServerWritableStream<unknown, unknown>): void {
  const inner = (call as unknown as { call?: { stream?: unknown } }).call;
  const stream = inner?.stream as { closed?: unknown; destroyed?: unknown; close?: unknown } | undefined;
  if (stream === undefined || typeof stream.close !== 'function') return;
  if (stream.closed === true || stream.destroyed === true) return;
  (stream.close as (code: number) => void).call(stream, http2.NGHTTP2_CANCEL);
}
