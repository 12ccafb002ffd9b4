// The opening exchange: the control side sends `hello` with its protocol version, the worker answers
// `ready` with the same version. Nothing else may come first; any deviation closes the connection, because
// a peer speaking another version would misread every later message.

import { ProtocolError, TimeoutError } from '../errors.js';
import { PROTOCOL_VERSION } from './messages.js';
import type { HelloMessage, Message, ReadyMessage } from './messages.js';
import type { MessageTransport } from './transport.js';

/** Default time to wait for the peer's half of the handshake. */
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;

/** Options of clientHandshake (the control side). */
export interface ClientHandshakeOptions {
  /** How long to wait for `ready`. Default DEFAULT_HANDSHAKE_TIMEOUT_MS. */
  readonly timeoutMs?: number;
  /** Plain data sent in `hello.info`. */
  readonly info?: Record<string, unknown>;
}

/** Options of serverHandshake (the worker side). */
export interface ServerHandshakeOptions {
  /** Plain data sent in `ready.info` (pid, mount point, ...). */
  readonly info?: Record<string, unknown>;
  /** How long to wait for `hello`. Default DEFAULT_HANDSHAKE_TIMEOUT_MS. */
  readonly timeoutMs?: number;
}

/** Sends `hello` and waits for a matching `ready`; resolves with it. On failure the transport is closed. */
export async function clientHandshake(
  transport: MessageTransport,
  options: ClientHandshakeOptions = {},
): Promise<ReadyMessage> {
  const hello: HelloMessage =
    options.info === undefined
      ? { type: 'hello', version: PROTOCOL_VERSION }
      : { type: 'hello', version: PROTOCOL_VERSION, info: options.info };
  sendOrClose(transport, hello);
  const first = await firstMessage(transport, 'ready', options.timeoutMs);
  if (first.type !== 'ready')
    return fail(transport, `expected ready as the first message, got ${first.type}`);
  checkVersion(transport, 'worker', first.version);
  return first;
}

/** Waits for `hello`, checks its version and answers `ready`; resolves with the hello. */
export async function serverHandshake(
  transport: MessageTransport,
  options: ServerHandshakeOptions = {},
): Promise<HelloMessage> {
  const first = await firstMessage(transport, 'hello', options.timeoutMs);
  if (first.type !== 'hello')
    return fail(transport, `expected hello as the first message, got ${first.type}`);
  checkVersion(transport, 'control plane', first.version);
  sendOrClose(
    transport,
    options.info === undefined
      ? { type: 'ready', version: PROTOCOL_VERSION }
      : { type: 'ready', version: PROTOCOL_VERSION, info: options.info },
  );
  return first;
}

/** A handshake that cannot send its half (info not plain data, peer gone) leaves nothing worth keeping open. */
function sendOrClose(transport: MessageTransport, msg: Message): void {
  try {
    transport.send(msg);
  } catch (err) {
    transport.close(err instanceof Error ? err : undefined);
    throw err;
  }
}

function checkVersion(transport: MessageTransport, peer: string, version: number): void {
  if (version !== PROTOCOL_VERSION) {
    fail(transport, `${peer} speaks protocol version ${version}, this side speaks ${PROTOCOL_VERSION}`);
  }
}

function fail(transport: MessageTransport, message: string): never {
  const err = new ProtocolError(`handshake failed: ${message}`);
  transport.close(err);
  throw err;
}

/** Resolves with the first message only; later ones stay queued in the transport for the rpc layer. */
function firstMessage(
  transport: MessageTransport,
  expected: Message['type'],
  timeoutMs = DEFAULT_HANDSHAKE_TIMEOUT_MS,
): Promise<Message> {
  return new Promise((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      onMessage.dispose();
      onClose.dispose();
    };
    const timer = setTimeout(() => {
      done();
      const err = new TimeoutError(`handshake failed: no ${expected} within ${timeoutMs} ms`);
      transport.close(err);
      reject(err);
    }, timeoutMs);
    const onMessage = transport.onMessage((msg) => {
      done();
      resolve(msg);
    });
    const onClose = transport.onClose((err) => {
      done();
      reject(err ?? new ProtocolError(`handshake failed: connection closed before ${expected}`));
    });
  });
}
