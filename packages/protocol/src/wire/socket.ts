// Unix-socket adapter for MessageTransport, plus the listen/connect helpers the control plane and the
// worker use. The socket file is the worker's only door: it is created mode 0600 so only its owner (root,
// which runs both sides) can connect, and any connection that slips in before the chmod is dropped.

import { chmod, stat, unlink } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { dirname } from 'node:path';
import {
  AlreadyExistsError,
  InvalidArgumentError,
  NotFoundError,
  ProtocolError,
  UnavailableError,
  toAgentFenseError,
} from '../errors.js';
import type { FrameOptions } from './frames.js';
import { createFramedTransport } from './transport.js';
import type { MessageTransport } from './transport.js';

/** Default cap on bytes queued for a peer that does not read: four maximum-size frames. */
export const DEFAULT_MAX_WRITE_BUFFER_BYTES = 64 * 1024 * 1024;

/** sockaddr_un.sun_path is 108 bytes on Linux, including the terminating NUL. */
const MAX_UNIX_PATH_BYTES = 107;

/** Mode of the listening socket file: owner read/write only (connect(2) needs write permission). */
const SOCKET_FILE_MODE = 0o600;

/** Options of a socket transport. */
export interface SocketTransportOptions extends FrameOptions {
  /**
   * Close the connection (ProtocolError) once this many bytes wait in the socket's write buffer: a peer
   * that stopped reading must not make us buffer without bound. Default DEFAULT_MAX_WRITE_BUFFER_BYTES.
   */
  readonly maxWriteBufferBytes?: number;
}

/** Wraps a connected socket as a MessageTransport; the transport owns the socket from now on. */
export function createSocketTransport(
  socket: Socket,
  options: SocketTransportOptions = {},
): MessageTransport {
  const maxWriteBufferBytes = options.maxWriteBufferBytes ?? DEFAULT_MAX_WRITE_BUFFER_BYTES;
  let socketError: Error | undefined;
  const transport = createFramedTransport({
    ...(options.maxFrameBytes === undefined ? {} : { maxFrameBytes: options.maxFrameBytes }),
    write: (frame) => {
      // Node queues what the kernel will not take yet, so nothing is lost; we only bound how much.
      socket.write(frame);
      if (socket.writableLength > maxWriteBufferBytes) {
        transport.close(
          new ProtocolError(
            `peer is not reading: ${socket.writableLength} bytes queued, more than ${maxWriteBufferBytes}`,
          ),
        );
      }
    },
    shutdown: (err) => {
      // On error, drop at once (the stream is corrupt or the peer hostile); otherwise flush what we queued.
      if (err !== undefined) socket.destroy();
      else socket.end(() => socket.destroy());
    },
  });
  socket.on('data', (chunk: Buffer) => transport.receive(chunk));
  // 'close' always follows 'error'; remember the cause so the close can carry it.
  socket.on('error', (err) => {
    socketError = err;
  });
  socket.on('close', () => {
    transport.close(
      socketError === undefined
        ? undefined
        : new ProtocolError(`connection failed: ${socketError.message}`, { cause: socketError }),
    );
  });
  if (socket.destroyed) transport.close(new ProtocolError('socket was already closed'));
  return transport;
}

/** Options of listenUnix. */
export interface ListenUnixOptions extends SocketTransportOptions {
  /** Socket path; its directory must exist, the path must not. */
  readonly path: string;
  /** Receives each accepted connection as a transport (after the socket file is locked down). */
  readonly onConnection: (transport: MessageTransport) => void;
}

/** A listening Unix socket. */
export interface UnixServer {
  readonly path: string;
  /** Stops accepting, closes every open connection (UnavailableError), removes the socket file. */
  close(): Promise<void>;
}

/** Listens on a new Unix socket file with mode 0600. */
export async function listenUnix(options: ListenUnixOptions): Promise<UnixServer> {
  const { path } = options;
  checkSocketPath(path);
  const dir = dirname(path);
  const dirStat = await stat(dir).catch((err: unknown) => {
    throw new NotFoundError(`socket directory ${dir} is not accessible: ${errorCode(err)}`, { cause: err });
  });
  if (!dirStat.isDirectory()) throw new NotFoundError(`socket directory ${dir} is not a directory`);

  const live = new Set<MessageTransport>();
  // The socket file exists (with the umask's mode) between listen() and chmod(); connections accepted in
  // that window did not pass the 0600 check, so they are dropped rather than served.
  let lockedDown = false;
  const server: Server = createServer((socket) => {
    if (!lockedDown) {
      socket.destroy();
      return;
    }
    const transport = createSocketTransport(socket, options);
    live.add(transport);
    transport.onClose(() => live.delete(transport));
    try {
      options.onConnection(transport);
    } catch (err) {
      transport.close(toAgentFenseError(err, 'onConnection failed'));
    }
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => {
      reject(
        errorCode(err) === 'EADDRINUSE'
          ? new AlreadyExistsError(`socket path ${path} already exists`, { cause: err })
          : new UnavailableError(`cannot listen on ${path}: ${errorCode(err)}`, { cause: err }),
      );
    });
    server.listen({ path, exclusive: true }, () => resolve());
  });
  try {
    await chmod(path, SOCKET_FILE_MODE);
  } catch (err) {
    await closeServer(server, path);
    throw new UnavailableError(`cannot restrict ${path} to mode 0600: ${errorCode(err)}`, { cause: err });
  }
  lockedDown = true;

  let closing: Promise<void> | undefined;
  return {
    path,
    close() {
      closing ??= (async () => {
        const done = closeServer(server, path);
        for (const transport of [...live])
          transport.close(new UnavailableError(`server on ${path} is closing`));
        await done;
      })();
      return closing;
    },
  };
}

/** Options of connectUnix. */
export type ConnectUnixOptions = SocketTransportOptions;

/** Connects to a Unix socket; a missing or refusing socket is an UnavailableError. */
export function connectUnix(path: string, options: ConnectUnixOptions = {}): Promise<MessageTransport> {
  checkSocketPath(path);
  return new Promise((resolve, reject) => {
    const socket = createConnection({ path });
    const onError = (err: Error): void => {
      socket.destroy();
      reject(new UnavailableError(`cannot connect to ${path}: ${errorCode(err)}`, { cause: err }));
    };
    socket.once('error', onError);
    socket.once('connect', () => {
      socket.off('error', onError);
      resolve(createSocketTransport(socket, options));
    });
  });
}

function checkSocketPath(path: string): void {
  if (path.length === 0 || path.includes('\0')) {
    throw new InvalidArgumentError(`invalid socket path ${JSON.stringify(path)}`);
  }
  const bytes = Buffer.byteLength(path);
  if (bytes > MAX_UNIX_PATH_BYTES) {
    throw new InvalidArgumentError(
      `socket path is ${bytes} bytes, more than the ${MAX_UNIX_PATH_BYTES} a Unix socket address holds: ${path}`,
    );
  }
}

/** Closes the server and removes its socket file (Node leaves it behind when the server never listened). */
async function closeServer(server: Server, path: string): Promise<void> {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await unlink(path).catch((err: unknown) => {
    // ENOENT is the normal case: Node unlinks the socket file itself on close.
    if (errorCode(err) !== 'ENOENT') throw err;
  });
}

function errorCode(err: unknown): string {
  if (err instanceof Error && 'code' in err && typeof err.code === 'string') return err.code;
  return err instanceof Error ? err.message : String(err);
}
