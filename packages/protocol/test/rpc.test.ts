// The rpc layer and the handshake over the in-memory pair (which still runs the codec and frame decoder).
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  CancelledError,
  ConflictError,
  InternalError,
  NotFoundError,
  PROTOCOL_VERSION,
  ProtocolError,
  RpcPeer,
  TimeoutError,
  WorkerExitedError,
  clientHandshake,
  createCodec,
  createTransportPair,
  encodeFrame,
  serverHandshake,
} from '../src/index.js';
import type { HandlerContext, Message, MessageTransport, PairTransport } from '../src/index.js';

function peers(): { client: RpcPeer; server: RpcPeer; a: PairTransport; b: PairTransport } {
  const [a, b] = createTransportPair();
  const client = new RpcPeer({ transport: a });
  const server = new RpcPeer({ transport: b });
  onTestFinished(() => {
    client.close();
    server.close();
  });
  return { client, server, a, b };
}

/** Resolves with the error the transport closes with. */
function closedWith(transport: MessageTransport): Promise<Error | undefined> {
  return new Promise((resolve) => transport.onClose(resolve));
}

/** A promise plus its resolver, to hold handlers open without sleeping. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Resolves with the abort reason when the handler's signal fires. */
function aborted(context: HandlerContext): Promise<unknown> {
  return new Promise((resolve) =>
    context.signal.addEventListener('abort', () => resolve(context.signal.reason), { once: true }),
  );
}

describe('requests', () => {
  it('numbers requests 1, 2, 3... and routes each response by replyTo', async () => {
    const [a, b] = createTransportPair();
    const client = new RpcPeer({ transport: a });
    onTestFinished(() => client.close());
    const seen: Message[] = [];
    b.onMessage((msg) => {
      seen.push(msg);
      // Answer in reverse order once all three are in, to prove routing is by id, not by order.
      if (seen.length === 3) {
        for (const m of [...seen].reverse()) {
          if (m.type === 'request') b.send({ type: 'response', replyTo: m.id, ok: true, result: `r${m.id}` });
        }
      }
    });
    const results = await Promise.all([
      client.request('x', 1),
      client.request('y', 2),
      client.request('z', 3),
    ]);
    expect(seen).toEqual([
      { type: 'request', id: 1, method: 'x', params: 1 },
      { type: 'request', id: 2, method: 'y', params: 2 },
      { type: 'request', id: 3, method: 'z', params: 3 },
    ]);
    expect(results).toEqual(['r1', 'r2', 'r3']);
  });

  it('runs handlers concurrently and resolves each caller with its own result', async () => {
    const { client, server } = peers();
    const gates = [deferred(), deferred(), deferred()];
    server.handle('wait', async (params) => {
      const i = params as number;
      await gates[i]?.promise;
      return { i, doubled: i * 2 };
    });
    const calls = [0, 1, 2].map((i) => client.request('wait', i));
    expect(client.pendingCount).toBe(3);
    gates[2]?.resolve();
    await expect(calls[2]).resolves.toEqual({ i: 2, doubled: 4 });
    gates[0]?.resolve();
    gates[1]?.resolve();
    await expect(Promise.all(calls)).resolves.toEqual([
      { i: 0, doubled: 0 },
      { i: 1, doubled: 2 },
      { i: 2, doubled: 4 },
    ]);
    expect(client.pendingCount).toBe(0);
  });

  it('works in both directions on one connection', async () => {
    const { client, server } = peers();
    client.handle('whoami', () => 'client');
    server.handle('whoami', () => 'server');
    await expect(client.request('whoami', {})).resolves.toBe('server');
    await expect(server.request('whoami', {})).resolves.toBe('client');
  });

  it('carries binary params and results as Uint8Array', async () => {
    const { client, server } = peers();
    server.handle('reverse', (params) => Uint8Array.from([...(params as Uint8Array)].reverse()));
    const result = await client.request('reverse', Uint8Array.of(1, 2, 3));
    expect(result).toBeInstanceOf(Uint8Array);
    expect([...(result as Uint8Array)]).toEqual([3, 2, 1]);
  });

  it('answers an unknown method with AF_NOT_FOUND', async () => {
    const { client } = peers();
    const err = await client.request('nope', {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err).toMatchObject({
      code: 'AF_NOT_FOUND',
      message: 'unknown method: nope',
      details: { method: 'nope' },
    });
  });

  it('refuses a second handler for the same method until the first is disposed', async () => {
    const { client, server } = peers();
    const sub = server.handle('m', () => 1);
    expect(() => server.handle('m', () => 2)).toThrow(/already registered/);
    sub.dispose();
    server.handle('m', () => 2);
    await expect(client.request('m', null)).resolves.toBe(2);
  });

  it('rejects a request whose params cannot be encoded without sending anything', async () => {
    const { client, server } = peers();
    let called = false;
    server.handle('m', () => (called = true));
    await expect(client.request('m', { when: new Date() })).rejects.toThrow(/\$\.params\.when is a Date/);
    expect(client.pendingCount).toBe(0);
    await expect(client.request('m', {})).resolves.toBe(true);
    expect(called).toBe(true);
  });
});

describe('errors across the wire', () => {
  it('rebuilds an AgentFenseError with its class, code, message and details', async () => {
    const { client, server } = peers();
    server.handle('commit', () => {
      throw new ConflictError('2 files changed underneath', { details: { paths: ['/a', '/b'] } });
    });
    const err = await client.request('commit', {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect(err).toMatchObject({
      code: 'AF_CONFLICT',
      message: '2 files changed underneath',
      details: { paths: ['/a', '/b'] },
    });
  });

  it('turns a foreign error (sync throw or rejection) into AF_INTERNAL with its message', async () => {
    const { client, server } = peers();
    server.handle('sync', () => {
      throw new TypeError('x is not a function');
    });
    server.handle('async', () => Promise.reject(new Error('disk on fire')));
    const syncErr = await client.request('sync', {}).catch((e: unknown) => e);
    expect(syncErr).toBeInstanceOf(InternalError);
    expect(syncErr).toMatchObject({ code: 'AF_INTERNAL', message: 'x is not a function' });
    await expect(client.request('async', {})).rejects.toMatchObject({
      code: 'AF_INTERNAL',
      message: 'disk on fire',
    });
  });

  it('still delivers code and message when the details are not plain data', async () => {
    const { client, server } = peers();
    server.handle('m', () => {
      throw new ConflictError('conflict', { details: { when: new Date() } });
    });
    const err = await client.request('m', {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect(err).toMatchObject({ message: 'conflict', details: undefined });
  });

  it('answers with AF_PROTOCOL when the result cannot be sent', async () => {
    const [a, b] = createTransportPair({ maxFrameBytes: 1024 });
    const client = new RpcPeer({ transport: a });
    const server = new RpcPeer({ transport: b });
    onTestFinished(() => client.close());
    server.handle('big', () => new Uint8Array(4096));
    server.handle('date', () => new Date());
    await expect(client.request('big', {})).rejects.toMatchObject({
      code: 'AF_PROTOCOL',
      message: expect.stringMatching(/exceeds the maximum of 1024 bytes/) as unknown,
    });
    await expect(client.request('date', {})).rejects.toThrow(ProtocolError);
    // The connection survives a local encoding failure.
    server.handle('small', () => 'ok');
    await expect(client.request('small', {})).resolves.toBe('ok');
  });
});

describe('timeouts and cancellation', () => {
  it('rejects with TimeoutError and cancels the handler on the other side', async () => {
    const { client, server } = peers();
    const handlerAborted = deferred<unknown>();
    server.handle('hang', (_params, context) => {
      void aborted(context).then(handlerAborted.resolve);
      return new Promise(() => undefined);
    });
    const err = await client.request('hang', {}, { timeoutMs: 20 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err).toMatchObject({ code: 'AF_TIMEOUT', message: 'request hang (#1) timed out after 20 ms' });
    await expect(handlerAborted.promise).resolves.toBeInstanceOf(CancelledError);
    expect(client.pendingCount).toBe(0);
  });

  it('applies the peer default timeout when a request sets none', async () => {
    const [a] = createTransportPair();
    const client = new RpcPeer({ transport: a, defaultTimeoutMs: 15 });
    onTestFinished(() => client.close());
    await expect(client.request('unanswered', {})).rejects.toThrow(/timed out after 15 ms/);
  });

  it('rejects bad timeouts up front', () => {
    const { client } = peers();
    expect(() => client.request('m', {}, { timeoutMs: 0 })).toThrow(/timeoutMs must be a positive/);
    expect(() => new RpcPeer({ transport: createTransportPair()[0], defaultTimeoutMs: -1 })).toThrow(
      /timeoutMs must be a positive/,
    );
  });

  it('cancel: the caller rejects with CancelledError and the handler signal fires with one too', async () => {
    const { client, server } = peers();
    const started = deferred();
    const handlerAborted = deferred<unknown>();
    server.handle('long', (_params, context) => {
      void aborted(context).then(handlerAborted.resolve);
      started.resolve();
      return new Promise(() => undefined);
    });
    const controller = new AbortController();
    const call = client.request('long', {}, { signal: controller.signal });
    await started.promise;
    controller.abort(new Error('user pressed ^C'));
    const err = await call.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CancelledError);
    expect(err).toMatchObject({ code: 'AF_CANCELLED', message: 'request long cancelled' });
    expect((err as Error).cause).toEqual(new Error('user pressed ^C'));
    const reason = await handlerAborted.promise;
    expect(reason).toBeInstanceOf(CancelledError);
    expect((reason as Error).message).toBe('request #1 cancelled by the peer');
  });

  it('an already-aborted signal rejects without calling the peer', async () => {
    const { client, server } = peers();
    let calls = 0;
    server.handle('m', () => ++calls);
    await expect(client.request('m', {}, { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(
      CancelledError,
    );
    await expect(client.request('m', {})).resolves.toBe(1);
    expect(calls).toBe(1);
  });

  it('a handler that gives up on cancel does not answer, and the connection stays usable', async () => {
    const { client, server, b } = peers();
    const sent: Message[] = [];
    const originalSend = b.send.bind(b);
    b.send = (msg) => {
      sent.push(msg);
      originalSend(msg);
    };
    server.handle('long', (_params, context) =>
      aborted(context).then(() => {
        throw new CancelledError('stopped');
      }),
    );
    server.handle('quick', () => 'fine');
    const controller = new AbortController();
    const call = client.request('long', {}, { signal: controller.signal });
    await Promise.resolve();
    controller.abort();
    await expect(call).rejects.toBeInstanceOf(CancelledError);
    await expect(client.request('quick', {})).resolves.toBe('fine');
    expect(sent).toEqual([{ type: 'response', replyTo: 2, ok: true, result: 'fine' }]);
  });

  it('does not leave abort listeners on a shared signal', async () => {
    const { client, server } = peers();
    server.handle('m', () => 'ok');
    const controller = new AbortController();
    // 20 > the default max listeners (10): a leak would emit MaxListenersExceededWarning and fail the file.
    for (let i = 0; i < 20; i++) await client.request('m', {}, { signal: controller.signal });
    controller.abort();
    expect(client.pendingCount).toBe(0);
  });
});

describe('close', () => {
  it('rejects every pending request with the close error and later requests at once', async () => {
    const { client, server } = peers();
    server.handle('hang', () => new Promise(() => undefined));
    const calls = [1, 2, 3].map(() => client.request('hang', {}));
    const exit = new WorkerExitedError('worker exited with signal SIGKILL', { signal: 'SIGKILL' });
    await Promise.resolve();
    client.close(exit);
    for (const call of calls) await expect(call).rejects.toBe(exit);
    expect(client.pendingCount).toBe(0);
    await expect(client.request('hang', {})).rejects.toBe(exit);
  });

  it('rejects pending requests with ProtocolError "connection closed" when the peer closes', async () => {
    const { client, server } = peers();
    const started = deferred();
    server.handle('hang', () => {
      started.resolve();
      return new Promise(() => undefined);
    });
    const calls = [client.request('hang', {}), client.request('hang', {})];
    await started.promise;
    server.close();
    for (const call of calls) {
      const err = await call.catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ProtocolError);
      expect((err as Error).message).toBe('connection closed');
    }
    await expect(client.request('hang', {})).rejects.toThrow('connection closed');
  });

  it('aborts running handlers when the connection closes', async () => {
    const { client, server } = peers();
    const handlerAborted = deferred<unknown>();
    const started = deferred();
    server.handle('hang', (_params, context) => {
      void aborted(context).then(handlerAborted.resolve);
      started.resolve();
      return new Promise(() => undefined);
    });
    const call = client.request('hang', {});
    await started.promise;
    client.close();
    await expect(call).rejects.toThrow('connection closed');
    await expect(handlerAborted.promise).resolves.toMatchObject({
      code: 'AF_CANCELLED',
      message: 'connection closed',
    });
  });

  it('closes the connection when a response names a request that was never sent', async () => {
    const [a, b] = createTransportPair();
    const client = new RpcPeer({ transport: a });
    b.send({ type: 'response', replyTo: 99, ok: true, result: null });
    const err = await closedWith(a);
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err?.message).toBe('response to request #99, which was never sent');
    expect(client.closed).toBe(true);
  });
});

describe('events and shutdown', () => {
  it('delivers events in order with their payloads', async () => {
    const { client, server } = peers();
    const got: [string, unknown][] = [];
    const done = deferred();
    client.onEvent((name, payload) => {
      got.push([name, payload]);
      if (got.length === 3) done.resolve();
    });
    expect(server.emit('log', { level: 'info', msg: 'a' })).toBe(true);
    server.emit('audit', [{ seq: 1 }]);
    server.emit('health', { time: 1, ops: 0 });
    await done.promise;
    expect(got).toEqual([
      ['log', { level: 'info', msg: 'a' }],
      ['audit', [{ seq: 1 }]],
      ['health', { time: 1, ops: 0 }],
    ]);
  });

  it('emit returns false once closed instead of throwing', () => {
    const { server } = peers();
    server.close();
    expect(server.emit('log', {})).toBe(false);
    expect(server.sendShutdown()).toBe(false);
  });

  it('delivers shutdown as its own message, with its reason', async () => {
    const { client, server } = peers();
    const reason = new Promise((resolve) => server.onShutdown(resolve));
    expect(client.sendShutdown('sandbox deleted')).toBe(true);
    await expect(reason).resolves.toBe('sandbox deleted');
  });

  it('closes the connection (InternalError) when an event listener throws', async () => {
    const { client, server, a } = peers();
    client.onEvent(() => {
      throw new Error('listener bug');
    });
    server.emit('log', {});
    const err = await closedWith(a);
    expect(err).toBeInstanceOf(InternalError);
    expect(err?.message).toBe('event message listener failed: listener bug');
  });
});

describe('handshake', () => {
  it('exchanges hello and ready with the protocol version and info', async () => {
    const [a, b] = createTransportPair();
    onTestFinished(() => a.close());
    const [ready, hello] = await Promise.all([
      clientHandshake(a, { timeoutMs: 1000, info: { sandboxId: 'sb1' } }),
      serverHandshake(b, { info: { pid: 1234 } }),
    ]);
    expect(PROTOCOL_VERSION).toBe(1);
    expect(hello).toEqual({ type: 'hello', version: 1, info: { sandboxId: 'sb1' } });
    expect(ready).toEqual({ type: 'ready', version: 1, info: { pid: 1234 } });
  });

  it('hands messages sent right after ready over to the rpc layer without loss', async () => {
    const [a, b] = createTransportPair();
    const serverSide = (async () => {
      await serverHandshake(b, {});
      const server = new RpcPeer({ transport: b });
      server.handle('ping', () => 'pong');
      // Same tick as ready: these may reach the client before it has an RpcPeer.
      server.emit('log', { msg: 'first' });
      server.emit('log', { msg: 'second' });
      return server;
    })();
    await clientHandshake(a, { timeoutMs: 1000 });
    const client = new RpcPeer({ transport: a });
    onTestFinished(() => client.close());
    const events: unknown[] = [];
    const two = deferred();
    client.onEvent((_name, payload) => {
      events.push(payload);
      if (events.length === 2) two.resolve();
    });
    await serverSide;
    await two.promise;
    expect(events).toEqual([{ msg: 'first' }, { msg: 'second' }]);
    await expect(client.request('ping', {})).resolves.toBe('pong');
  });

  it('server refuses a hello with another version and closes', async () => {
    const [a, b] = createTransportPair();
    const server = serverHandshake(b, {});
    a.send({ type: 'hello', version: PROTOCOL_VERSION + 1 });
    await expect(server).rejects.toThrow(
      new ProtocolError('handshake failed: control plane speaks protocol version 2, this side speaks 1'),
    );
    expect(b.closed).toBe(true);
    await expect(closedWith(a)).resolves.toBeUndefined();
  });

  it('client refuses a ready with another version and closes', async () => {
    const [a, b] = createTransportPair();
    b.onMessage((msg) => {
      if (msg.type === 'hello') b.send({ type: 'ready', version: 7 });
    });
    await expect(clientHandshake(a, { timeoutMs: 1000 })).rejects.toThrow(
      'handshake failed: worker speaks protocol version 7, this side speaks 1',
    );
    expect(a.closed).toBe(true);
    expect(a.closeError).toBeInstanceOf(ProtocolError);
  });

  it('server refuses any other first message', async () => {
    const [a, b] = createTransportPair();
    const server = serverHandshake(b, {});
    a.send({ type: 'request', id: 1, method: 'commit', params: {} });
    await expect(server).rejects.toThrow(
      'handshake failed: expected hello as the first message, got request',
    );
    expect(b.closed).toBe(true);
  });

  it('closes the connection when its own half cannot be encoded', async () => {
    const [a] = createTransportPair();
    await expect(clientHandshake(a, { info: { started: new Date() } })).rejects.toThrow(
      /\$\.info\.started is a Date/,
    );
    expect(a.closed).toBe(true);
  });

  it('client gives up with TimeoutError when ready never comes', async () => {
    const [a] = createTransportPair();
    const err = await clientHandshake(a, { timeoutMs: 20 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect((err as Error).message).toBe('handshake failed: no ready within 20 ms');
    expect(a.closed).toBe(true);
  });

  it('client rejects when the peer hangs up before ready', async () => {
    const [a, b] = createTransportPair();
    b.onMessage(() => b.close());
    await expect(clientHandshake(a, { timeoutMs: 1000 })).rejects.toThrow(
      'handshake failed: connection closed before ready',
    );
  });
});

describe('garbage from the peer', () => {
  it.each([
    ['bytes that are not msgpack', encodeFrame(Uint8Array.of(0xd9, 200, 0x41)), /frame is not valid msgpack/],
    ['msgpack that is not a message', encodeFrame(createCodec().encode({ type: 'gossip' })), /message\.type/],
    [
      'a message with a bad field',
      encodeFrame(createCodec().encode({ type: 'request', id: -4, method: 'm' })),
      /invalid message: request\.id must be a non-negative integer \(got number -4\)/,
    ],
    ['a frame above the maximum', Buffer.from([0xff, 0xff, 0xff, 0xff]), /maximum of 16777216 bytes/],
  ])(
    '%s closes the connection with a ProtocolError and fails pending requests',
    async (_label, bytes, message) => {
      const { client, server, a, b } = peers();
      server.handle('hang', () => new Promise(() => undefined));
      const pending = client.request('hang', {});
      b.sendBytes(bytes);
      const err = await closedWith(a);
      expect(err).toBeInstanceOf(ProtocolError);
      expect(err?.message).toMatch(message);
      await expect(pending).rejects.toBe(err);
      // The other end sees an orderly close, as with a socket the peer hung up.
      await expect(closedWith(b)).resolves.toBeUndefined();
    },
  );

  it('a message that arrives after the garbage in the same chunk is never delivered', async () => {
    const [a, b] = createTransportPair();
    const got: Message[] = [];
    a.onMessage((msg) => got.push(msg));
    const good = encodeFrame(createCodec().encode({ type: 'shutdown' }));
    b.sendBytes(Buffer.concat([good, encodeFrame(Uint8Array.of(0xc1)), good]));
    await closedWith(a);
    expect(got).toEqual([{ type: 'shutdown' }]);
  });
});
