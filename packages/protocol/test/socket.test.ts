// The transport over real Unix sockets in a tmp dir: byte-level stream behaviour, hostile peers, and peers
// in other processes dying mid-request. The rpc semantics themselves are covered over the pair (rpc.test.ts).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import {
  AlreadyExistsError,
  FrameDecoder,
  NotFoundError,
  ProtocolError,
  RpcPeer,
  UnavailableError,
  clientHandshake,
  connectUnix,
  createCodec,
  encodeFrame,
  listenUnix,
  serverHandshake,
} from '../src/index.js';
import type { HandlerContext, UnixServer } from '../src/index.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const PROTOCOL_SRC = new URL('../src/index.ts', import.meta.url).href;
/** Generous: a child has to start node and tsx on a shared two-core machine. */
const CHILD_READY_MS = 20_000;

let dir: string;
let socketPath: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'af-proto-'));
  socketPath = join(dir, 'worker.sock');
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface TestServer {
  readonly server: UnixServer;
  /** The error (or undefined) each accepted connection closed with, in order of closing. */
  readonly closeErrors: (Error | undefined)[];
  /** Resolves on the next connection close. */
  nextClose(): Promise<Error | undefined>;
  /** Resolves with the abort reason of the next `hang` handler whose signal fires. */
  nextHangAborted(): Promise<unknown>;
}

/** A worker-like server: handshake, then ping/echo/hang handlers. Closed when the test finishes. */
async function startServer(): Promise<TestServer> {
  const closeErrors: (Error | undefined)[] = [];
  const closeWaiters: ((err: Error | undefined) => void)[] = [];
  const abortWaiters: ((reason: unknown) => void)[] = [];
  const server = await listenUnix({
    path: socketPath,
    onConnection: (transport) => {
      transport.onClose((err) => {
        closeErrors.push(err);
        closeWaiters.shift()?.(err);
      });
      serverHandshake(transport, { info: { role: 'test-server' } }).then(
        () => {
          const peer = new RpcPeer({ transport });
          peer.handle('ping', () => 'pong');
          peer.handle('echo', (params) => params);
          peer.handle('hang', (_params, context: HandlerContext) => {
            context.signal.addEventListener('abort', () => abortWaiters.shift()?.(context.signal.reason));
            return new Promise(() => undefined);
          });
        },
        () => undefined, // The close listener above records why the handshake failed.
      );
    },
  });
  onTestFinished(() => server.close());
  return {
    server,
    closeErrors,
    nextClose: () => new Promise((resolve) => closeWaiters.push(resolve)),
    nextHangAborted: () => new Promise((resolve) => abortWaiters.push(resolve)),
  };
}

/** Connects, handshakes and returns an RpcPeer, closed when the test finishes. */
async function connectPeer(): Promise<RpcPeer> {
  const transport = await connectUnix(socketPath);
  await clientHandshake(transport, { timeoutMs: 5000 });
  const peer = new RpcPeer({ transport });
  onTestFinished(() => peer.close());
  return peer;
}

/** A raw socket plus a decoder, to write bytes exactly as we choose and read back messages. */
async function rawClient(): Promise<{ socket: Socket; next: () => Promise<unknown> }> {
  const socket = createConnection({ path: socketPath });
  onTestFinished(() => void socket.destroy());
  await once(socket, 'connect');
  const codec = createCodec();
  const decoder = new FrameDecoder();
  const received: unknown[] = [];
  const waiters: (() => void)[] = [];
  socket.on('data', (chunk: Buffer) => {
    for (const frame of decoder.push(chunk)) received.push(codec.decode(frame));
    for (const wake of waiters.splice(0)) wake();
  });
  const next = async (): Promise<unknown> => {
    while (received.length === 0) await new Promise<void>((resolve) => waiters.push(resolve));
    return received.shift();
  };
  return { socket, next };
}

const frame = (value: unknown): Buffer => encodeFrame(createCodec().encode(value));

/** Starts a node child running `script` (ESM, with tsx so it can import our TS source); argv: module, socket. */
function spawnChild(script: string): { child: ChildProcess; ready: Promise<string> } {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script, PROTOCOL_SRC, socketPath],
    {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const ready = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`child not ready after ${CHILD_READY_MS} ms: ${stderr}`)),
      CHILD_READY_MS,
    );
    child.stdout?.once('data', (chunk: Buffer) => {
      clearTimeout(timer);
      resolve(chunk.toString().trim());
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`child exited (${code ?? signal}) before ready: ${stderr}`));
    });
  });
  return { child, ready };
}

describe('listenUnix / connectUnix', () => {
  it('creates the socket file with mode 0600 and removes it on close', async () => {
    const { server } = await startServer();
    const st = await stat(socketPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    await server.close();
    await expect(stat(socketPath)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses an existing path and a missing directory', async () => {
    await writeFile(socketPath, '');
    await expect(listenUnix({ path: socketPath, onConnection: () => undefined })).rejects.toBeInstanceOf(
      AlreadyExistsError,
    );
    await expect(
      listenUnix({ path: join(dir, 'missing', 'w.sock'), onConnection: () => undefined }),
    ).rejects.toBeInstanceOf(NotFoundError);
    await expect(
      listenUnix({ path: join(dir, 'x'.repeat(120)), onConnection: () => undefined }),
    ).rejects.toThrow(/more than the 107 a Unix socket address holds/);
  });

  it('connectUnix to a missing socket is an UnavailableError naming the path', async () => {
    const err = await connectUnix(socketPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as Error).message).toBe(`cannot connect to ${socketPath}: ENOENT`);
  });

  it('serves requests end to end after the handshake', async () => {
    await startServer();
    const transport = await connectUnix(socketPath);
    const ready = await clientHandshake(transport, { timeoutMs: 5000 });
    expect(ready).toEqual({ type: 'ready', version: 1, info: { role: 'test-server' } });
    const peer = new RpcPeer({ transport });
    onTestFinished(() => peer.close());
    await expect(peer.request('ping', {})).resolves.toBe('pong');
    const data = Buffer.alloc(1024 * 1024, 7);
    const echoed = (await peer.request('echo', { data })) as { data: Uint8Array };
    expect(Buffer.from(echoed.data).equals(data)).toBe(true);
  });

  it('a throwing onConnection closes that connection with InternalError, not the process', async () => {
    let serverSideClosed!: Promise<Error | undefined>;
    const server = await listenUnix({
      path: socketPath,
      onConnection: (transport) => {
        serverSideClosed = new Promise((resolve) => transport.onClose(resolve));
        throw new Error('boom');
      },
    });
    onTestFinished(() => server.close());
    const client = await connectUnix(socketPath);
    await new Promise((resolve) => client.onClose(resolve));
    expect(client.closed).toBe(true);
    expect(await serverSideClosed).toMatchObject({
      code: 'AF_INTERNAL',
      message: 'onConnection failed: boom',
    });
  });

  it('server.close() closes live connections and the client sees them fail', async () => {
    const { server } = await startServer();
    const peer = await connectPeer();
    // Observe the rejection from the start: close() may reject it before the next line runs.
    const pendingFails = expect(peer.request('hang', {})).rejects.toBeInstanceOf(ProtocolError);
    await expect(peer.request('ping', {})).resolves.toBe('pong');
    await server.close();
    await pendingFails;
    expect(peer.closed).toBe(true);
  });
});

describe('stream handling', () => {
  it('reassembles frames written one byte at a time', async () => {
    await startServer();
    const raw = await rawClient();
    const bytes = Buffer.concat([
      frame({ type: 'hello', version: 1 }),
      frame({ type: 'request', id: 1, method: 'echo', params: { text: 'byte by byte' } }),
    ]);
    for (const byte of bytes) {
      await new Promise<void>((resolve, reject) =>
        raw.socket.write(Uint8Array.of(byte), (err) => (err ? reject(err) : resolve())),
      );
    }
    expect(await raw.next()).toEqual({ type: 'ready', version: 1, info: { role: 'test-server' } });
    expect(await raw.next()).toEqual({
      type: 'response',
      replyTo: 1,
      ok: true,
      result: { text: 'byte by byte' },
    });
  });

  it('handles many frames in one write, hello included', async () => {
    await startServer();
    const raw = await rawClient();
    const requests = Array.from({ length: 50 }, (_, i) =>
      frame({ type: 'request', id: i + 1, method: 'echo', params: i }),
    );
    raw.socket.write(Buffer.concat([frame({ type: 'hello', version: 1 }), ...requests]));
    expect(await raw.next()).toMatchObject({ type: 'ready' });
    const responses = [];
    for (let i = 0; i < 50; i++) responses.push(await raw.next());
    expect(responses).toEqual(
      Array.from({ length: 50 }, (_, i) => ({ type: 'response', replyTo: i + 1, ok: true, result: i })),
    );
  });

  it('an oversized frame closes that connection with a clear error; other connections keep working', async () => {
    const srv = await startServer();
    const healthy = await connectPeer();
    const raw = await rawClient();
    const closed = srv.nextClose();
    const header = Buffer.alloc(4);
    header.writeUInt32BE(64 * 1024 * 1024);
    raw.socket.write(header);
    const err = await closed;
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err?.message).toBe(
      'peer announced a frame of 67108864 bytes, more than the maximum of 16777216 bytes',
    );
    await once(raw.socket, 'close');
    await expect(healthy.request('ping', {})).resolves.toBe('pong');
    const fresh = await connectPeer();
    await expect(fresh.request('ping', {})).resolves.toBe('pong');
  });

  it('garbage instead of hello closes the connection; the server keeps serving', async () => {
    const srv = await startServer();
    const raw = await rawClient();
    const closed = srv.nextClose();
    raw.socket.write(encodeFrame(Buffer.from('definitely not msgpack \xc1')));
    expect(await closed).toBeInstanceOf(ProtocolError);
    await once(raw.socket, 'close');
    const fresh = await connectPeer();
    await expect(fresh.request('ping', {})).resolves.toBe('pong');
  });

  it('refuses to send a frame above the maximum and keeps the connection', async () => {
    await startServer();
    const transport = await connectUnix(socketPath, { maxFrameBytes: 1024 });
    await clientHandshake(transport, { timeoutMs: 5000 });
    const peer = new RpcPeer({ transport });
    onTestFinished(() => peer.close());
    await expect(peer.request('echo', new Uint8Array(2048))).rejects.toThrow(
      /exceeds the maximum of 1024 bytes/,
    );
    await expect(peer.request('ping', {})).resolves.toBe('pong');
  });
});

describe('backpressure', () => {
  it('closes the connection instead of buffering without bound when the peer stops reading', async () => {
    // A peer that accepts and never reads: the kernel buffer fills, then Node's write queue grows.
    const stuckPath = join(dir, 'stuck.sock');
    const accepted: Socket[] = [];
    const stuck = createServer((socket) => {
      socket.pause();
      accepted.push(socket);
    });
    await new Promise<void>((resolve) => stuck.listen(stuckPath, resolve));
    onTestFinished(async () => {
      // A paused socket never reads the EOF, so close() alone would wait for it forever.
      for (const socket of accepted) socket.destroy();
      await new Promise<void>((resolve) => stuck.close(() => resolve()));
    });
    const transport = await connectUnix(stuckPath, { maxWriteBufferBytes: 1024 * 1024 });
    const closed = new Promise<Error | undefined>((resolve) => transport.onClose(resolve));
    const chunk = new Uint8Array(512 * 1024);
    let sent = 0;
    // Bounded: 64 x 512 KiB = 32 MiB, far beyond any kernel socket buffer plus the 1 MiB cap.
    while (!transport.closed && sent < 64) {
      transport.send({ type: 'event', name: 'blob', payload: chunk });
      sent++;
    }
    const err = await closed;
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err?.message).toMatch(/^peer is not reading: \d+ bytes queued, more than 1048576$/);
    expect(sent).toBeLessThan(64);
    expect(() => transport.send({ type: 'shutdown' })).toThrow('cannot send shutdown: connection closed');
  });
});

describe('peer processes that die', () => {
  it('a worker killed with SIGKILL mid-request fails every pending request', async () => {
    const { child, ready } = spawnChild(`
      const [moduleUrl, path] = process.argv.slice(1);
      const { listenUnix, serverHandshake, RpcPeer } = await import(moduleUrl);
      await listenUnix({ path, onConnection: async (transport) => {
        await serverHandshake(transport, {});
        const peer = new RpcPeer({ transport });
        peer.handle('ping', () => 'pong');
        peer.handle('hang', () => new Promise(() => {}));
      } });
      process.stdout.write('listening\\n');
    `);
    expect(await ready).toBe('listening');
    const peer = await connectPeer();
    await expect(peer.request('ping', {})).resolves.toBe('pong');
    const pending = [peer.request('hang', 1), peer.request('hang', 2), peer.request('hang', 3)];
    // Let the requests reach the worker: its ping answer comes after it has read all three.
    await expect(peer.request('ping', {})).resolves.toBe('pong');
    expect(peer.pendingCount).toBe(3);
    child.kill('SIGKILL');
    const results = await Promise.allSettled(pending);
    for (const result of results) {
      expect(result.status).toBe('rejected');
      expect((result as PromiseRejectedResult).reason).toBeInstanceOf(ProtocolError);
    }
    expect(peer.pendingCount).toBe(0);
    await expect(peer.request('ping', {})).rejects.toBeInstanceOf(ProtocolError);
  });

  it('a client that dies mid-request aborts its handler; the server keeps serving', async () => {
    const srv = await startServer();
    const aborted = srv.nextHangAborted();
    const { child, ready } = spawnChild(`
      const [moduleUrl, path] = process.argv.slice(1);
      const { connectUnix, clientHandshake, RpcPeer } = await import(moduleUrl);
      const transport = await connectUnix(path);
      await clientHandshake(transport, { timeoutMs: 5000 });
      const peer = new RpcPeer({ transport });
      await peer.request('ping', {});
      void peer.request('hang', {});
      await peer.request('ping', {});
      process.stdout.write('sent\\n');
    `);
    expect(await ready).toBe('sent');
    child.kill('SIGKILL');
    const reason = await aborted;
    expect(reason).toMatchObject({ code: 'AF_CANCELLED', message: 'connection closed' });
    const fresh = await connectPeer();
    await expect(fresh.request('ping', {})).resolves.toBe('pong');
  });
});
