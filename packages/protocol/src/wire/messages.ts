// The wire messages between the control plane and a worker, as one discriminated union on `type`.
// Anything decoded from the wire is `unknown` until parseMessage has checked it field by field.

import { InvalidArgumentError, ProtocolError } from '../errors.js';
import type { Guard } from './guards.js';
import * as g from './guards.js';

/** The version both sides must speak; bump it on any incompatible change to messages or methods. */
export const PROTOCOL_VERSION = 1;

/** First frame from the control side. */
export interface HelloMessage {
  readonly type: 'hello';
  readonly version: number;
  /** Free-form plain data about the caller (control version, sandbox id, ...). */
  readonly info?: Record<string, unknown>;
}

/** The worker's answer to `hello`: it is ready to serve requests. */
export interface ReadyMessage {
  readonly type: 'ready';
  readonly version: number;
  /** Free-form plain data about the worker (pid, mount point, ...). */
  readonly info?: Record<string, unknown>;
}

/** A call; `id` is unique among the sender's in-flight requests and never reused on one connection. */
export interface RequestMessage {
  readonly type: 'request';
  readonly id: number;
  readonly method: string;
  readonly params: unknown;
}

/** An error as it crosses the wire. `code` is kept as sent: an unknown code becomes AF_INTERNAL on rebuild. */
export interface RawWireError {
  readonly code: string;
  readonly message: string;
  readonly details?: Record<string, unknown>;
}

/** The successful answer to request `replyTo`. */
export interface SuccessResponseMessage {
  readonly type: 'response';
  readonly replyTo: number;
  readonly ok: true;
  readonly result: unknown;
}

/** The failed answer to request `replyTo`. */
export interface ErrorResponseMessage {
  readonly type: 'response';
  readonly replyTo: number;
  readonly ok: false;
  readonly error: RawWireError;
}

/** The answer to a request, discriminated on `ok`. */
export type ResponseMessage = SuccessResponseMessage | ErrorResponseMessage;

/** The sender no longer wants the answer to its request `id`; the handler's AbortSignal fires. */
export interface CancelMessage {
  readonly type: 'cancel';
  readonly id: number;
}

/** A one-way notification (audit batches, logs, health); never answered. */
export interface EventMessage {
  readonly type: 'event';
  readonly name: string;
  readonly payload: unknown;
}

/** Asks the peer to finish its work and exit; a message of its own so it works even when rpc is wedged. */
export interface ShutdownMessage {
  readonly type: 'shutdown';
  readonly reason?: string;
}

/** Every message that may cross the wire. */
export type Message =
  | HelloMessage
  | ReadyMessage
  | RequestMessage
  | ResponseMessage
  | CancelMessage
  | EventMessage
  | ShutdownMessage;

/** The `type` tags, in one list so error messages can name them. */
export const MESSAGE_TYPES = [
  'hello',
  'ready',
  'request',
  'response',
  'cancel',
  'event',
  'shutdown',
] as const;

/** A message `type` tag. */
export type MessageType = (typeof MESSAGE_TYPES)[number];

const anything: Guard<unknown> = (value) => value;

/** Ids are positive integers exactly representable in float64 (msgpack may carry them as either). */
const messageId: Guard<number> = (value, path) => {
  const n = g.count(value, path);
  if (n === 0) throw new InvalidArgumentError(`${path} must be a positive integer (got 0)`);
  return n;
};

const version = g.count;
const info = g.optional(g.object);

const rawWireError = g.shape({
  code: g.string,
  message: g.string,
  details: g.optional(g.object),
});

const PARSERS: { readonly [T in MessageType]: Guard<Extract<Message, { type: T }>> } = {
  hello: (value, path) => ({ type: 'hello', ...g.shape({ version, info })(value, path) }),
  ready: (value, path) => ({ type: 'ready', ...g.shape({ version, info })(value, path) }),
  request: (value, path) => {
    const m = g.shape({ id: messageId, method: g.string, params: anything })(value, path);
    return { type: 'request', id: m.id, method: m.method, params: m.params };
  },
  response: (value, path) => {
    const m = g.shape({ replyTo: messageId, ok: g.boolean, result: anything, error: anything })(value, path);
    return m.ok
      ? { type: 'response', replyTo: m.replyTo, ok: true, result: m.result }
      : { type: 'response', replyTo: m.replyTo, ok: false, error: rawWireError(m.error, `${path}.error`) };
  },
  cancel: (value, path) => ({ type: 'cancel', ...g.shape({ id: messageId })(value, path) }),
  event: (value, path) => {
    const m = g.shape({ name: g.string, payload: anything })(value, path);
    return { type: 'event', name: m.name, payload: m.payload };
  },
  shutdown: (value, path) => ({
    type: 'shutdown',
    ...g.shape({ reason: g.optional(g.string) })(value, path),
  }),
};

/**
 * Checks a decoded value and returns it as a Message with only the known fields, or throws a
 * ProtocolError naming the field that is wrong. Never trusts the input's prototype or extra keys.
 */
export function parseMessage(value: unknown): Message {
  try {
    const tag = g.oneOf(MESSAGE_TYPES)(g.object(value, 'message').type, 'message.type');
    return PARSERS[tag](value, tag);
  } catch (err) {
    if (err instanceof InvalidArgumentError) throw new ProtocolError(`invalid message: ${err.message}`);
    throw err;
  }
}
