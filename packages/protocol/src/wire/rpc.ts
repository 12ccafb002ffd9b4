// The rpc layer: request/response with numeric ids, explicit cancel, timeouts, one-way events and the
// shutdown notice, over any MessageTransport. Either side may call the other; ids are per direction.

import {
  AgentFenseError,
  CancelledError,
  InternalError,
  InvalidArgumentError,
  NotFoundError,
  ProtocolError,
  TimeoutError,
  fromWire,
} from '../errors.js';
import type { WireError } from '../errors.js';
import type { Message, RequestMessage, ResponseMessage } from './messages.js';
import type { MessageTransport, Subscription } from './transport.js';

/** Per-call options of RpcPeer.request. */
export interface RequestOptions {
  /** Reject with TimeoutError (and cancel on the peer) after this long. Overrides the peer's default. */
  readonly timeoutMs?: number;
  /** Aborting rejects with CancelledError and sends `cancel`, so the peer's handler signal fires too. */
  readonly signal?: AbortSignal;
}

/** What a handler gets besides its params. */
export interface HandlerContext {
  /** Fires when the caller cancels or times out, or the connection closes. */
  readonly signal: AbortSignal;
}

/** Serves one method; its return value (or thrown error) is the response. */
export type RequestHandler = (params: unknown, context: HandlerContext) => unknown;

/** Options of an RpcPeer. */
export interface RpcPeerOptions {
  /** The connection; the peer takes ownership and closes it on close(). */
  readonly transport: MessageTransport;
  /** Timeout of requests that do not set one; undefined means wait until answered or closed. */
  readonly defaultTimeoutMs?: number;
}

interface Pending {
  resolve(result: unknown): void;
  reject(err: Error): void;
}

/** One side of an rpc connection (VS Code's ChannelClient and ChannelServer in one object). */
export class RpcPeer {
  readonly #transport: MessageTransport;
  readonly #defaultTimeoutMs: number | undefined;
  /** Last id this side used; ids start at 1 and are never reused, so a late answer cannot be misrouted. */
  #lastId = 0;
  readonly #pending = new Map<number, Pending>();
  readonly #handlers = new Map<string, RequestHandler>();
  /** Requests from the peer still being handled, by the peer's id, so `cancel` can reach them. */
  readonly #inFlight = new Map<number, AbortController>();
  readonly #eventListeners = new Set<(name: string, payload: unknown) => void>();
  readonly #shutdownListeners = new Set<(reason: string | undefined) => void>();
  readonly #subscriptions: Subscription[];

  constructor(options: RpcPeerOptions) {
    if (options.defaultTimeoutMs !== undefined) checkTimeout(options.defaultTimeoutMs);
    this.#transport = options.transport;
    this.#defaultTimeoutMs = options.defaultTimeoutMs;
    this.#subscriptions = [
      this.#transport.onMessage((msg) => this.#onMessage(msg)),
      this.#transport.onClose((err) => this.#onClose(err)),
    ];
  }

  /** True once the underlying connection is closed. */
  get closed(): boolean {
    return this.#transport.closed;
  }

  /** Number of this side's requests still waiting for an answer. */
  get pendingCount(): number {
    return this.#pending.size;
  }

  /**
   * Calls `method` on the peer; resolves with its result or rejects with the rebuilt error (TimeoutError,
   * CancelledError, the close error...). A bad `timeoutMs` is a caller bug and throws synchronously.
   */
  request(method: string, params: unknown, options: RequestOptions = {}): Promise<unknown> {
    const timeoutMs = options.timeoutMs ?? this.#defaultTimeoutMs;
    if (timeoutMs !== undefined) checkTimeout(timeoutMs);
    if (this.#transport.closed) return Promise.reject(this.#closedError());
    const { signal } = options;
    if (signal?.aborted === true) return Promise.reject(cancelledError(method, signal));

    const id = ++this.#lastId;
    return new Promise<unknown>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (): void => this.#abandon(id, cancelledError(method, signal));
      const settle = (): void => {
        this.#pending.delete(id);
        if (timer !== undefined) clearTimeout(timer);
        // Long-lived signals are shared by many requests: leaving listeners behind leaks (and warns).
        signal?.removeEventListener('abort', onAbort);
      };
      this.#pending.set(id, {
        resolve: (result) => {
          settle();
          resolve(result);
        },
        reject: (err) => {
          settle();
          reject(err);
        },
      });
      try {
        this.#transport.send({ type: 'request', id, method, params });
      } catch (err) {
        this.#pending.get(id)?.reject(err instanceof Error ? err : new InternalError(String(err)));
        return;
      }
      // Writing can close the transport (a peer that stopped reading), which already rejected us.
      if (!this.#pending.has(id)) return;
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) {
        timer = setTimeout(
          () =>
            this.#abandon(id, new TimeoutError(`request ${method} (#${id}) timed out after ${timeoutMs} ms`)),
          timeoutMs,
        );
      }
    });
  }

  /** Serves `method` for the peer; returns a subscription that unregisters it. One handler per method. */
  handle(method: string, handler: RequestHandler): Subscription {
    if (this.#handlers.has(method)) {
      throw new InvalidArgumentError(`a handler for ${method} is already registered`);
    }
    this.#handlers.set(method, handler);
    return {
      dispose: () => {
        if (this.#handlers.get(method) === handler) this.#handlers.delete(method);
      },
    };
  }

  /**
   * Sends a one-way event. Returns false (and sends nothing) when the connection is closed, so a timer
   * that flushes audit batches does not have to race the close; throws ProtocolError if not encodable.
   */
  emit(name: string, payload: unknown): boolean {
    if (this.#transport.closed) return false;
    this.#transport.send({ type: 'event', name, payload });
    return true;
  }

  /** Listens to the peer's events. A listener that throws closes the connection (InternalError). */
  onEvent(cb: (name: string, payload: unknown) => void): Subscription {
    this.#eventListeners.add(cb);
    return { dispose: () => void this.#eventListeners.delete(cb) };
  }

  /** Asks the peer to shut down; false when the connection is already closed. */
  sendShutdown(reason?: string): boolean {
    if (this.#transport.closed) return false;
    this.#transport.send(reason === undefined ? { type: 'shutdown' } : { type: 'shutdown', reason });
    return true;
  }

  /** Listens for the peer's shutdown notice. */
  onShutdown(cb: (reason: string | undefined) => void): Subscription {
    this.#shutdownListeners.add(cb);
    return { dispose: () => void this.#shutdownListeners.delete(cb) };
  }

  /** Listens for the connection closing (with its error, if any). */
  onClose(cb: (err?: Error) => void): Subscription {
    return this.#transport.onClose(cb);
  }

  /** Closes the connection; every pending request rejects with `err` (or ProtocolError 'connection closed'). */
  close(err?: Error): void {
    this.#transport.close(err);
  }

  #closedError(): Error {
    return this.#transport.closeError ?? new ProtocolError('connection closed');
  }

  /** Rejects request `id` with `err` and tells the peer, so its handler stops working for nobody. */
  #abandon(id: number, err: Error): void {
    const pending = this.#pending.get(id);
    if (pending === undefined) return;
    pending.reject(err);
    this.#trySend({ type: 'cancel', id });
  }

  #onMessage(msg: Message): void {
    switch (msg.type) {
      case 'request':
        this.#onRequest(msg);
        return;
      case 'response':
        this.#onResponse(msg);
        return;
      case 'cancel':
        this.#inFlight.get(msg.id)?.abort(new CancelledError(`request #${msg.id} cancelled by the peer`));
        return;
      case 'event':
        for (const cb of [...this.#eventListeners]) cb(msg.name, msg.payload);
        return;
      case 'shutdown':
        for (const cb of [...this.#shutdownListeners]) cb(msg.reason);
        return;
      case 'hello':
      case 'ready':
        this.close(new ProtocolError(`unexpected ${msg.type} message after the handshake`));
        return;
    }
  }

  #onResponse(msg: ResponseMessage): void {
    const pending = this.#pending.get(msg.replyTo);
    if (pending === undefined) {
      // Answers to cancelled or timed-out requests arrive late by design; an id we never used is a bug.
      if (msg.replyTo > this.#lastId) {
        this.close(new ProtocolError(`response to request #${msg.replyTo}, which was never sent`));
      }
      return;
    }
    if (msg.ok) pending.resolve(msg.result);
    else pending.reject(fromWire(msg.error));
  }

  #onRequest(msg: RequestMessage): void {
    const { id, method } = msg;
    if (this.#inFlight.has(id)) {
      this.close(new ProtocolError(`request id #${id} reused while still in flight`));
      return;
    }
    const handler = this.#handlers.get(method);
    if (handler === undefined) {
      this.#respondError(id, new NotFoundError(`unknown method: ${method}`, { details: { method } }));
      return;
    }
    const controller = new AbortController();
    this.#inFlight.set(id, controller);
    // Promise.try is Node 22+: wrap by hand so a synchronous throw becomes a rejection too.
    void new Promise<unknown>((resolve) => resolve(handler(msg.params, { signal: controller.signal })))
      .then(
        (result) => {
          if (!this.#answerable(id, controller)) return;
          try {
            this.#transport.send({ type: 'response', replyTo: id, ok: true, result });
          } catch (err) {
            // Usually a result too large for one frame or not plain data: the caller must still hear back.
            this.#respondError(id, err);
          }
        },
        (err: unknown) => {
          if (this.#answerable(id, controller)) this.#respondError(id, err);
        },
      )
      .finally(() => this.#inFlight.delete(id));
  }

  /** A cancelled request has no one waiting for it; a closed connection has no one to tell. */
  #answerable(id: number, controller: AbortController): boolean {
    return !controller.signal.aborted && !this.#transport.closed && this.#inFlight.get(id) === controller;
  }

  #respondError(replyTo: number, err: unknown): void {
    const error = toWireError(err);
    if (this.#trySend({ type: 'response', replyTo, ok: false, error })) return;
    // The details were not plain data (or too big): the code and message still have to get through.
    this.#trySend({
      type: 'response',
      replyTo,
      ok: false,
      error: { code: error.code, message: error.message },
    });
  }

  /** Sends unless the message cannot be encoded; used where the caller cannot do anything about failure. */
  #trySend(msg: Message): boolean {
    if (this.#transport.closed) return false;
    try {
      this.#transport.send(msg);
      return true;
    } catch {
      // Only encoding can fail here (we checked `closed`): the caller has a fallback or nothing to lose.
      return false;
    }
  }

  #onClose(err: Error | undefined): void {
    for (const sub of this.#subscriptions) sub.dispose();
    const reason = err ?? new ProtocolError('connection closed');
    for (const pending of [...this.#pending.values()]) pending.reject(reason);
    this.#pending.clear();
    for (const controller of this.#inFlight.values()) {
      controller.abort(new CancelledError('connection closed', { cause: reason }));
    }
    this.#inFlight.clear();
  }
}

/** The wire form of any thrown value: AgentFenseErrors keep their code and details, the rest is AF_INTERNAL. */
export function toWireError(err: unknown): WireError {
  if (err instanceof AgentFenseError) return err.toWire();
  return { code: 'AF_INTERNAL', message: err instanceof Error ? err.message : String(err) };
}

function cancelledError(method: string, signal: AbortSignal | undefined): CancelledError {
  return new CancelledError(
    `request ${method} cancelled`,
    signal?.reason === undefined ? {} : { cause: signal.reason },
  );
}

function checkTimeout(timeoutMs: number): void {
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
    throw new InvalidArgumentError(`timeoutMs must be a positive finite number (got ${timeoutMs})`);
  }
}
