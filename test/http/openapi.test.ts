// The OpenAPI document is true to the server: every route fastify registered (its onRoute hook) is
// documented and every documented operation is served; and every error kind reaches the client as
// `{ code, message }` with its status. The server runs in-process, over a backend that fails on purpose,
// and is reached over real HTTP on loopback.
/* eslint-disable @typescript-eslint/no-unsafe-member-access --
   Answers are parsed JSON (`any`); the document's own tests check their shapes. */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GRPC_CODE_OF_ERROR, createHttpServer, httpStatusFromGrpcCode } from '@agentfense/control';
import type { HttpBackend, HttpServer } from '@agentfense/control';
import { ERROR_CODES, NotFoundError, fromWire } from '@agentfense/protocol';
import { client } from '../helpers/http-fixture.js';

/** What every backend call throws; changed per test. */
let failure: unknown = new NotFoundError('nothing here');
const calls: string[] = [];
const backend = new Proxy({} as HttpBackend, {
  get: (_target, name) =>
    name === 'close'
      ? () => Promise.resolve()
      : () => {
          calls.push(String(name));
          throw failure;
        },
});

let server: HttpServer;
let url: string;

beforeAll(async () => {
  server = createHttpServer({ backend, insecureNoAuth: true });
  const { host, port } = await server.listen({ host: '127.0.0.1', port: 0 });
  url = `http://${host}:${port}`;
});

afterAll(() => server.close());

interface Operation {
  operationId: string;
  summary: string;
  tags: string[];
  parameters: { name: string; in: string }[];
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, { content: Record<string, { schema: unknown }> }>;
}

async function documentOperations(): Promise<Map<string, Operation>> {
  const doc = (await client(url)('GET', '/v1/openapi.json')).json as {
    openapi: string;
    paths: Record<string, Record<string, Operation>>;
  };
  expect(doc.openapi).toBe('3.1.0');
  const out = new Map<string, Operation>();
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) out.set(`${method.toUpperCase()} ${path}`, op);
  }
  return out;
}

/** `/v1/codebases/:id/files/*` as the document spells it. */
function documented(url: string): string {
  return url.replace(/:(\w+)/g, '{$1}').replace(/\*$/, '{path}');
}

describe('the OpenAPI document', () => {
  it('documents exactly the routes fastify registered', async () => {
    const registered = server.routes.map((r) => `${r.method} ${documented(r.url)}`).sort();
    const operations = await documentOperations();
    expect([...operations.keys()].sort()).toEqual(registered);
    expect(registered.length).toBeGreaterThanOrEqual(28);
    // The issue's table, at least.
    for (const route of [
      'POST /v1/codebases',
      'GET /v1/codebases',
      'GET /v1/codebases/{id}',
      'DELETE /v1/codebases/{id}',
      'GET /v1/codebases/{id}/files',
      'PUT /v1/codebases/{id}/files/{path}',
      'GET /v1/codebases/{id}/files/{path}',
      'POST /v1/sandboxes',
      'GET /v1/sandboxes',
      'GET /v1/sandboxes/{id}',
      'POST /v1/sandboxes/{id}/start',
      'POST /v1/sandboxes/{id}/stop',
      'DELETE /v1/sandboxes/{id}',
      'POST /v1/sandboxes/{id}/exec',
      'POST /v1/sandboxes/{id}/exec/stream',
      'GET /v1/sandboxes/{id}/diff',
      'GET /v1/sandboxes/{id}/changes',
      'POST /v1/sandboxes/{id}/commit',
      'POST /v1/sandboxes/{id}/discard',
      'GET /v1/sandboxes/{id}/logs',
      'GET /v1/sandboxes/{id}/audit',
      'POST /v1/sandboxes/{id}/sessions',
      'GET /v1/sandboxes/{id}/sessions',
      'GET /v1/sessions/{id}',
      'DELETE /v1/sessions/{id}',
      'POST /v1/sessions/{id}/exec',
    ]) {
      expect(registered, route).toContain(route);
    }
  });

  it('describes every operation fully: id, summary, tags, path parameters, success and error responses', async () => {
    const operations = await documentOperations();
    const ids = new Set<string>();
    for (const [key, op] of operations) {
      expect(op.operationId, key).toMatch(/^[A-Z][A-Za-z]+$/);
      expect(ids.has(op.operationId), `${op.operationId} is unique`).toBe(false);
      ids.add(op.operationId);
      expect(op.summary.length, key).toBeGreaterThan(5);
      expect(op.tags.length, key).toBe(1);
      const pathParams = [...key.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      expect(
        op.parameters.filter((p) => p.in === 'path').map((p) => p.name),
        key,
      ).toEqual(pathParams);
      expect(Object.keys(op.responses).sort(), key).toEqual(['200', 'default']);
      expect(op.responses.default?.content['application/json']?.schema, key).toMatchObject({
        required: ['code', 'message', 'details'],
      });
      if (key.startsWith('POST') || key.startsWith('PUT')) {
        const noBody = ['/start', '/stop'].some((suffix) => key.endsWith(suffix));
        expect(op.requestBody === undefined, key).toBe(noBody);
      }
    }
    const upload = operations.get('PUT /v1/codebases/{id}/files/{path}');
    expect(Object.keys(upload?.requestBody?.content ?? {})).toEqual(['application/octet-stream']);
    const stream = operations.get('POST /v1/sandboxes/{id}/exec/stream');
    expect(Object.keys(stream?.responses['200']?.content ?? {})).toEqual(['application/x-ndjson']);
  });

  it('serves every documented operation (none answers "no route")', async () => {
    failure = new NotFoundError('backend reached');
    const ids: Record<string, string> = {
      codebases: `cb_${randomUUID()}`,
      sandboxes: `sb_${randomUUID()}`,
      sessions: `ses_${randomUUID()}`,
    };
    const bodies: Record<string, unknown> = {
      CreateCodebase: { name: 'x' },
      CreateSandbox: { codebaseId: ids.codebases },
      Exec: { command: 'true' },
      ExecStream: { command: 'true' },
      SessionExec: { command: 'true' },
    };
    for (const [key, op] of await documentOperations()) {
      const [method, path] = key.split(' ') as [string, string];
      const concrete = path
        .replace(/^\/v1\/(\w+)\/\{id\}/, (_m, kind: string) => `/v1/${kind}/${ids[kind] ?? 'x'}`)
        .replace('{path}', 'a.txt');
      const body = bodies[op.operationId] ?? (op.requestBody?.content['application/json'] ? {} : undefined);
      const raw = op.requestBody?.content['application/octet-stream'] !== undefined ? 'bytes' : undefined;
      const answer = await client(url)(method, concrete, raw ?? body);
      expect(answer.json?.message ?? '', key).not.toMatch(/^no route/);
      expect(answer.status, `${key}: ${answer.text}`).toBeLessThan(500);
    }
    // Everything but the two meta routes and the codebase listing reached the backend.
    expect(calls.length).toBeGreaterThanOrEqual(25);
  });
});

/** The google.rpc.ErrorInfo every error carries, with our error kind as its reason. */
const info = (reason: string, metadata: Record<string, string> = {}) => ({
  '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
  reason,
  domain: 'agentfense',
  metadata,
});

describe('errors', () => {
  // What grpc-gateway answers for each gRPC code the original uses (runtime.HTTPStatusFromCode).
  const expected: Record<string, [grpc: number, http: number]> = {
    AF_INVALID_ARGUMENT: [3, 400],
    AF_NOT_FOUND: [5, 404],
    AF_ALREADY_EXISTS: [6, 409],
    AF_WRONG_STATE: [9, 400],
    AF_CONFLICT: [10, 409],
    AF_PERMISSION_DENIED: [7, 403],
    // Not the gateway's 429 for RESOURCE_EXHAUSTED: 507 Insufficient Storage says what happened.
    AF_NO_SPACE: [8, 507],
    AF_TIMEOUT: [4, 504],
    AF_CANCELLED: [1, 499],
    AF_UNAVAILABLE: [14, 503],
    AF_PROTOCOL: [13, 500],
    AF_WORKER_EXITED: [14, 503],
    AF_INTERNAL: [13, 500],
  };

  it.each(ERROR_CODES.map((code) => [code, ...(expected[code] ?? [0, 0])] as const))(
    '%s answers gRPC code %i with HTTP %i as google.rpc.Status',
    async (code, grpc, status) => {
      expect(GRPC_CODE_OF_ERROR[code]).toBe(grpc);
      if (code !== 'AF_NO_SPACE') expect(httpStatusFromGrpcCode(grpc)).toBe(status);
      failure = fromWire({ code, message: `a ${code} happened`, details: { why: 'test', n: 2 } });
      const answer = await client(url)('GET', `/v1/codebases/cb_${randomUUID()}`);
      expect(answer.status).toBe(status);
      const message = code === 'AF_INTERNAL' ? 'internal error (see the server log)' : `a ${code} happened`;
      expect(answer.json).toEqual({
        code: grpc,
        message,
        details: [info(code, { why: 'test', n: '2' })],
      });
    },
  );

  it('answers an unexpected failure with 500 INTERNAL without its message', async () => {
    failure = new Error('secret internal detail /root/.ssh');
    const answer = await client(url)('GET', `/v1/sandboxes/sb_${randomUUID()}`);
    expect(answer.status).toBe(500);
    expect(answer.json.code).toBe(13);
    expect(answer.json.details[0].reason).toBe('AF_INTERNAL');
    expect(answer.text).not.toContain('secret');
  });

  it('puts an error after the stream started into the final NDJSON line', async () => {
    // The sandbox is found RUNNING, then the command fails.
    const running = { state: 'RUNNING' };
    const streaming = new Proxy(backend, {
      get: (target, name) =>
        name === 'getSandbox'
          ? () => running
          : name === 'exec'
            ? () => Promise.reject(fromWire({ code: 'AF_WORKER_EXITED', message: 'worker died' }))
            : (Reflect.get(target, name) as unknown),
    });
    const own = createHttpServer({ backend: streaming, insecureNoAuth: true });
    const { port } = await own.listen({ host: '127.0.0.1', port: 0 });
    try {
      const answer = await client(`http://127.0.0.1:${port}`)(
        'POST',
        `/v1/sandboxes/sb_${randomUUID()}/exec/stream`,
        {
          command: 'true',
        },
      );
      expect(answer.status).toBe(200);
      expect(
        answer.text
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as unknown),
      ).toEqual([
        { done: true, error: { code: 14, message: 'worker died', details: [info('AF_WORKER_EXITED')] } },
      ]);
    } finally {
      await own.close();
    }
  });
});
