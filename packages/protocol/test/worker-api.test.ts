// The typed worker API over the in-memory pair: both sides validate what crosses, with precise errors.
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  InvalidArgumentError,
  PermissionDeniedError,
  ProtocolError,
  RpcPeer,
  createTransportPair,
  createWorkerClient,
  serveWorkerApi,
} from '../src/index.js';
import type { CommitResult, WorkerClient, WorkerHandlers, WorkerServer } from '../src/index.js';

const COMMIT_RESULT: CommitResult = {
  applied: [{ path: '/src/a.ts', kind: 'modified', type: 'file', size: 12 }],
  conflicts: [{ path: '/src/b.ts', reason: 'changed in the codebase since first read' }],
};

function handlers(overrides: Partial<WorkerHandlers> = {}): WorkerHandlers {
  return {
    mount: ({ mountpoint }) => ({ mountpoint, pid: 42 }),
    unmount: () => ({}),
    setRules: ({ rules }) => ({ version: rules.length }),
    setAudit: () => ({}),
    stats: () => ({
      uptimeMs: 5,
      ops: { read: { count: 3, errors: 1, p50Us: 12.5, p99Us: 80 } },
      rssBytes: 1000,
      pssBytes: null,
      openHandles: 2,
    }),
    changes: () => ({ changes: [{ path: '/gone', kind: 'deleted', type: 'file', size: null }] }),
    diff: ({ paths }) => ({ diff: `diff of ${paths?.join(',') ?? 'all'}`, binary: [] }),
    commit: () => COMMIT_RESULT,
    more: () => ({}),
    discard: () => ({}),
    checkpoint: ({ layerDir }) => ({ frozen: [layerDir], bytes: 4096 }),
    setFrozenBytes: () => ({}),
    restore: () => ({}),
    compactLayers: ({ to }) => ({ frozen: [to], switched: true, bytes: 0 }),
    readFile: ({ path }) => {
      if (path === '/secret') throw new PermissionDeniedError('read denied: /secret', { details: { path } });
      return { data: Buffer.from(`contents of ${path}`) };
    },
    writeFile: () => ({}),
    ...overrides,
  };
}

function connect(overrides: Partial<WorkerHandlers> = {}): {
  client: WorkerClient;
  worker: WorkerServer;
  control: RpcPeer;
  workerPeer: RpcPeer;
} {
  const [a, b] = createTransportPair();
  const control = new RpcPeer({ transport: a });
  const workerPeer = new RpcPeer({ transport: b });
  onTestFinished(() => control.close());
  return {
    client: createWorkerClient(control),
    worker: serveWorkerApi(workerPeer, handlers(overrides)),
    control,
    workerPeer,
  };
}

describe('worker methods', () => {
  it('round-trips every method with typed results', async () => {
    const { client } = connect();
    await expect(
      client.request('setRules', { rules: [{ pattern: '**/*.env', permission: 'none' }] }),
    ).resolves.toEqual({ version: 1 });
    await expect(client.request('setAudit', { allowed: true })).resolves.toEqual({});
    const stats = await client.request('stats', {});
    expect(stats.ops.read).toEqual({ count: 3, errors: 1, p50Us: 12.5, p99Us: 80 });
    expect(stats.pssBytes).toBeNull();
    await expect(client.request('changes', {})).resolves.toEqual({
      changes: [{ path: '/gone', kind: 'deleted', type: 'file', size: null }],
    });
    await expect(client.request('diff', { paths: ['/a', '/b'] })).resolves.toEqual({
      diff: 'diff of /a,/b',
      binary: [],
    });
    await expect(client.request('diff', {})).resolves.toEqual({ diff: 'diff of all', binary: [] });
    await expect(client.request('commit', { mode: 'detect-conflicts' })).resolves.toEqual(COMMIT_RESULT);
    await expect(client.request('discard', { paths: ['/x'] })).resolves.toEqual({});
    const { data } = await client.request('readFile', { path: '/src/a.ts' });
    expect(data).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(data).toString()).toBe('contents of /src/a.ts');
    await expect(client.request('writeFile', { path: '/n', data: Uint8Array.of(1) })).resolves.toEqual({});
  });

  it('passes handler errors through with their kind', async () => {
    const { client } = connect();
    const err = await client.request('readFile', { path: '/secret' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermissionDeniedError);
    expect(err).toMatchObject({ code: 'AF_PERMISSION_DENIED', details: { path: '/secret' } });
  });

  it('the worker answers bad params with AF_INVALID_ARGUMENT naming the field', async () => {
    const { control } = connect();
    // Bypass the typed client, as a buggy or foreign control plane would.
    await expect(control.request('commit', { mode: 'yolo' })).rejects.toMatchObject({
      code: 'AF_INVALID_ARGUMENT',
      message:
        "commit params.mode must be one of 'detect-conflicts', 'last-writer-wins' (got string \"yolo\")",
    });
    await expect(
      control.request('setRules', { rules: [{ pattern: 1, permission: 'read' }] }),
    ).rejects.toThrow('setRules params.rules[0].pattern must be a string (got number 1)');
    await expect(control.request('writeFile', { path: '/f', data: 'text' })).rejects.toThrow(
      /writeFile params\.data must be binary data/,
    );
  });

  it('the handler sees only known params fields', async () => {
    let seen: unknown;
    const { control } = connect({
      discard: (params) => {
        seen = params;
        return {};
      },
    });
    await control.request('discard', { paths: ['/a'], sneaky: true });
    expect(seen).toEqual({ paths: ['/a'] });
  });

  it('the client checks params before sending', async () => {
    let called = false;
    const { client } = connect({
      setAudit: () => {
        called = true;
        return {};
      },
    });
    await expect(client.request('setAudit', { allowed: 'yes' as unknown as boolean })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    expect(called).toBe(false);
  });

  it('the client turns a malformed result into a ProtocolError', async () => {
    const { client } = connect({
      commit: () =>
        ({ applied: [{ path: '/a', kind: 'renamed', type: 'file', size: 1 }], conflicts: [] }) as never,
    });
    const err = await client.request('commit', { mode: 'last-writer-wins' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProtocolError);
    expect((err as Error).message).toBe(
      "worker broke the protocol: commit result.applied[0].kind must be one of 'added', 'modified', 'deleted' (got string \"renamed\")",
    );
  });
});

describe('worker events', () => {
  it('delivers typed, validated events to listeners of that name only', async () => {
    const { client, worker } = connect();
    const audits: unknown[] = [];
    const health = new Promise((resolve) => client.onEvent('health', resolve));
    client.onEvent('audit', (batch) => audits.push(batch));
    const batch = [
      { seq: 1, time: 10, op: 'open', path: '/.env', decision: 'deny', permission: 'none', errno: 'ENOENT' },
    ] as const;
    expect(worker.emit('audit', batch)).toBe(true);
    worker.emit('health', { time: 11, ops: 42 });
    await expect(health).resolves.toEqual({ time: 11, ops: 42 });
    expect(audits).toEqual([batch]);
  });

  it('the worker refuses to emit a malformed event', () => {
    const { worker } = connect();
    expect(() => worker.emit('log', { level: 'loud', msg: 'x' } as never)).toThrow(
      "log event.level must be one of 'trace', 'debug', 'info', 'warn', 'error', 'fatal' (got string \"loud\")",
    );
  });

  it('a malformed event from the worker closes the connection with a ProtocolError', async () => {
    const { client, control, workerPeer } = connect();
    client.onEvent('audit', () => undefined);
    const closed = new Promise<Error | undefined>((resolve) => control.onClose(resolve));
    workerPeer.emit('audit', [{ seq: -1 }]);
    const err = await closed;
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err?.message).toBe(
      'worker broke the protocol: audit event[0].seq must be a non-negative integer (got number -1)',
    );
  });
});
