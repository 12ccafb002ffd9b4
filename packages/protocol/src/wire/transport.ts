// The transport layer: whole messages in, whole messages out, over some byte channel (a Unix socket, an
// in-memory pair). It owns framing, decoding and validation, so the rpc layer above only ever sees
// well-formed Messages, and a peer that sends anything else loses its connection instead of crashing us.

import { InternalError, ProtocolError, toAgentFenseError } from '../errors.js';
import { createCodec } from './codec.js';
import type { Codec } from './codec.js';
import { FrameDecoder, encodeFrame, resolveMaxFrameBytes } from './frames.js';
import type { FrameOptions } from './frames.js';
import { parseMessage } from './messages.js';
import type { Message } from './messages.js';

/** Undoes a subscription (VS Code's IDisposable). Disposing twice is harmless. */
export interface Subscription {
  dispose(): void;
}

/** A message-passing connection to one peer (VS Code's IMessagePassingProtocol). */
export interface MessageTransport {
  /**
   * Encodes and queues `msg`. Throws ProtocolError when the transport is closed or the message cannot be
   * encoded (not plain data, larger than the maximum frame); the connection stays open in the latter case.
   */
  send(msg: Message): void;
  /**
   * Calls `cb` for each valid message received, in order. Messages that arrive while nobody listens are
   * kept and handed to the first listener (on a microtask), so a handshake can hand over to rpc without loss.
   */
  onMessage(cb: (msg: Message) => void): Subscription;
  /** Calls `cb` once when the connection closes, with the error that closed it (none for an orderly close). */
  onClose(cb: (err?: Error) => void): Subscription;
  /** Closes the connection; `err` (if any) is what close listeners, and so pending requests, receive. */
  close(err?: Error): void;
  /** True once closed, by either side. */
  readonly closed: boolean;
  /** The error the transport closed with, if it closed with one. */
  readonly closeError: Error | undefined;
}

/** How a framed transport talks to its byte channel. */
export interface FramedTransportOptions extends FrameOptions {
  /** Writes one complete frame to the channel. */
  readonly write: (frame: Buffer) => void;
  /** Releases the channel, abruptly when `err` is set, after flushing otherwise. Called once. */
  readonly shutdown: (err: Error | undefined) => void;
  /** Message codec; defaults to a fresh msgpack codec. */
  readonly codec?: Codec;
}

/** A MessageTransport plus the entry point for bytes read from its channel. */
export interface FramedTransport extends MessageTransport {
  /** Feeds bytes read from the channel; bad bytes close the transport with a ProtocolError (never throws). */
  receive(chunk: Uint8Array): void;
}

/** Builds a MessageTransport over any byte channel; socket.ts and pair.ts are thin adapters around it. */
export function createFramedTransport(options: FramedTransportOptions): FramedTransport {
  const maxFrameBytes = resolveMaxFrameBytes(options);
  const codec = options.codec ?? createCodec();
  const decoder = new FrameDecoder({ maxFrameBytes });
  const messageListeners = new Set<(msg: Message) => void>();
  const closeListeners = new Set<(err?: Error) => void>();
  // Messages received while no listener was attached (or while older ones still wait), oldest first.
  const backlog: Message[] = [];
  let flushScheduled = false;
  let closed = false;
  let closeError: Error | undefined;

  const close = (err?: Error): void => {
    if (closed) return;
    closed = true;
    closeError = err;
    try {
      options.shutdown(err);
    } catch (shutdownErr) {
      reportListenerError(shutdownErr);
    }
    for (const cb of [...closeListeners]) callCloseListener(cb, err);
    closeListeners.clear();
  };

  const dispatch = (msg: Message): void => {
    for (const cb of [...messageListeners]) {
      try {
        cb(msg);
      } catch (err) {
        // A listener bug must not escape into the socket's event emitter (that would crash the process);
        // closing makes it visible to everyone waiting on this connection instead.
        close(new InternalError(`${msg.type} message listener failed: ${errorMessage(err)}`, { cause: err }));
        return;
      }
    }
  };

  const flushBacklog = (): void => {
    flushScheduled = false;
    while (backlog.length > 0 && messageListeners.size > 0) {
      dispatch(backlog.shift() as Message);
    }
  };

  const deliver = (msg: Message): void => {
    if (messageListeners.size === 0 || backlog.length > 0) backlog.push(msg);
    else dispatch(msg);
  };

  return {
    get closed() {
      return closed;
    },
    get closeError() {
      return closeError;
    },
    send(msg) {
      if (closed) {
        throw new ProtocolError(
          `cannot send ${msg.type}: connection closed`,
          closeError && { cause: closeError },
        );
      }
      options.write(encodeFrame(codec.encode(msg), { maxFrameBytes }));
    },
    onMessage(cb) {
      messageListeners.add(cb);
      if (backlog.length > 0 && !flushScheduled) {
        flushScheduled = true;
        // Deferred so the caller can finish wiring (register rpc handlers) before old messages arrive.
        queueMicrotask(flushBacklog);
      }
      return { dispose: () => void messageListeners.delete(cb) };
    },
    onClose(cb) {
      if (closed) {
        queueMicrotask(() => callCloseListener(cb, closeError));
        return { dispose: () => undefined };
      }
      closeListeners.add(cb);
      return { dispose: () => void closeListeners.delete(cb) };
    },
    close,
    receive(chunk) {
      if (closed) return;
      let frames: Buffer[];
      try {
        frames = decoder.push(chunk);
      } catch (err) {
        close(asProtocolError(err));
        return;
      }
      for (const frame of frames) {
        if (closed) return;
        let msg: Message;
        try {
          msg = parseMessage(codec.decode(frame));
        } catch (err) {
          close(asProtocolError(err));
          return;
        }
        deliver(msg);
      }
    },
  };
}

function callCloseListener(cb: (err?: Error) => void, err: Error | undefined): void {
  try {
    cb(err);
  } catch (listenerErr) {
    reportListenerError(listenerErr);
  }
}

/**
 * A close listener threw: there is no connection left to fail, and throwing would crash the process from
 * inside an event emitter. A process warning keeps it visible (and fails the test suite's warning check).
 */
function reportListenerError(err: unknown): void {
  process.emitWarning(toAgentFenseError(err, 'transport close listener failed'));
}

function asProtocolError(err: unknown): Error {
  return err instanceof ProtocolError ? err : toAgentFenseError(err, 'failed to read a message');
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
