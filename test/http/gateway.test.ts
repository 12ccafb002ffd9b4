// Clients written for the original's grpc-gateway work unchanged: the REST face speaks the
// gateway's JSON mapping. Over real HTTP against `agentfense serve`: camelCase answers with defaults
// present and int64 values as strings; requests with camelCase or proto names, enums by name or number,
// `*_UNSPECIFIED`, int64 as strings or numbers, Durations as "90s", unknown fields, no Content-Type; and
// bad input answered with google.rpc.Status and the gateway's HTTP status, changing nothing.
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment --
   Answers are parsed JSON (`any`); each one's shape is checked against the served OpenAPI schema (check()). */
import { describe, expect, it } from 'vitest';
import { bearer, expectError, rawRequest, useServer } from '../helpers/http-fixture.js';

const api = useServer('af-http-gateway-');
const { call, check } = api;

/** Every object key in an answer, except inside the maps whose keys are data (labels, env, metadata). */
function keysOf(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) for (const item of value) keysOf(item, out);
  else if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      out.push(key);
      if (!['labels', 'env', 'metadata'].includes(key)) keysOf(item, out);
    }
  }
  return out;
}

async function codebaseCount(): Promise<number> {
  return ((await call('GET', '/v1/codebases?pageSize=1000')).json.codebases as unknown[]).length;
}

async function sandboxCount(cb: string): Promise<number> {
  return ((await call('GET', `/v1/sandboxes?codebaseId=${cb}`)).json.sandboxes as unknown[]).length;
}

describe('grpc-gateway JSON', () => {
  it('answers in camelCase with every field present and int64 values as strings', async () => {
    const created = await call('POST', '/v1/codebases', { name: 'gw' });
    check('CreateCodebase', created);
    expect(created.json).toEqual({
      id: expect.stringMatching(/^cb_/),
      name: 'gw',
      ownerId: '',
      size: '0',
      fileCount: 0,
      kind: 'stored',
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    const cb = created.json.id as string;
    const sb = await call('POST', '/v1/sandboxes', { codebaseId: cb, labels: { owner_team: 'x' } });
    check('CreateSandbox', sb);
    expect(sb.json).toMatchObject({
      codebaseId: cb,
      status: 'SANDBOX_STATUS_PENDING',
      runtime: 'RUNTIME_TYPE_BWRAP',
      image: '',
      labels: { owner_team: 'x' },
      startedAt: null,
      // Every limit, each an int64 string (the defaults every sandbox gets; 0 = none).
      resources: Object.fromEntries(
        ['memoryBytes', 'cpuQuota', 'cpuShares', 'pidsLimit', 'diskBytes', 'tmpBytes'].map((k) => [
          k,
          expect.stringMatching(/^\d+$/),
        ]),
      ),
    });
    const list = await call('GET', `/v1/sandboxes?codebaseId=${cb}`);
    check('ListSandboxes', list);
    expect(list.json.nextPageToken).toBe('');
    for (const answer of [created, sb, list, await call('GET', '/v1/codebases')]) {
      for (const key of keysOf(answer.json)) expect(key, answer.text).not.toMatch(/_/);
    }
    await call('DELETE', `/v1/sandboxes/${sb.json.id as string}`);
  });

  it('takes camelCase or proto names, enums by name or number, int64 strings, Durations, and ignores unknown fields', async () => {
    const cb = (await call('POST', '/v1/codebases', { name: 'gw', owner_id: 'alice', color: 'red' })).json;
    expect(cb.ownerId).toBe('alice');
    const camel = (await call('POST', '/v1/codebases', { name: 'gw2', ownerId: 'bob', extra: { a: 1 } }))
      .json;
    expect(camel.ownerId).toBe('bob');
    const answer = await call('POST', '/v1/sandboxes', {
      codebaseId: cb.id,
      permissions: [
        { pattern: '**', type: 1, permission: 3, note: 'ignored' },
        { pattern: '/out/', type: 'PATTERN_TYPE_DIRECTORY', permission: '4', priority: '10' },
        {
          pattern: '/secret.txt',
          type: 'PATTERN_TYPE_UNSPECIFIED',
          permission: 'PERMISSION_NONE',
          priority: 100,
        },
      ],
      runtime: 'RUNTIME_TYPE_UNSPECIFIED',
      resources: { memoryBytes: '268435456', pids_limit: 64, diskBytes: '1048576', swap: 1 },
      expiresIn: '90s',
      unknownField: true,
    });
    expect(answer.status, answer.text).toBe(200);
    check('CreateSandbox', answer);
    expect(answer.json).toMatchObject({
      runtime: 'RUNTIME_TYPE_BWRAP',
      permissions: [
        { pattern: '**', type: 'PATTERN_TYPE_GLOB', permission: 'PERMISSION_READ', priority: 0 },
        { pattern: '/out/', type: 'PATTERN_TYPE_DIRECTORY', permission: 'PERMISSION_WRITE', priority: 10 },
        { pattern: '/secret.txt', permission: 'PERMISSION_NONE', priority: 100 },
      ],
      resources: { memoryBytes: '268435456', pidsLimit: '64', diskBytes: '1048576' },
    });
    expect(Date.parse(answer.json.expiresAt as string) - Date.parse(answer.json.createdAt as string)).toBe(
      90_000,
    );
    const other = await call('POST', '/v1/sandboxes', {
      codebase_id: cb.id,
      resources: { disk_bytes: 4096 },
      expires_in: 30,
    });
    expect(other.json.resources.diskBytes).toBe('4096');
    // Query parameters: either name, enums by number, unknown ones ignored.
    const ids = async (query: string): Promise<string[]> =>
      ((await call('GET', `/v1/sandboxes?${query}`)).json.sandboxes as { id: string }[]).map((s) => s.id);
    const both = [answer.json.id, other.json.id];
    expect(await ids(`codebaseId=${cb.id as string}&pageSize=10&colour=red`)).toEqual(both);
    expect(await ids(`codebase_id=${cb.id as string}&status=1`)).toEqual(both);
    expect(await ids(`codebase_id=${cb.id as string}&status=2`)).toEqual([]);
    const paged = await call('GET', `/v1/codebases?ownerId=alice&pageSize=1`);
    expect((paged.json.codebases as { id: string }[]).map((c) => c.id)).toEqual([cb.id]);
    for (const id of both) await call('DELETE', `/v1/sandboxes/${id as string}`);
  });

  it('reads JSON bodies sent without a Content-Type, as the original README curls send them', async () => {
    const answer = await rawRequest(
      api.served.url,
      'POST',
      '/v1/codebases',
      '{"name":"no-type","ownerId":"c"}',
      bearer(api.served),
    );
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(answer.json).toMatchObject({ name: 'no-type', ownerId: 'c' });
  });

  it('refuses bad input with google.rpc.Status and the gateway status, changing nothing', async () => {
    const cb = (await call('POST', '/v1/codebases', { name: 'gw-bad' })).json.id as string;
    const codebases = await codebaseCount();
    const bad: [string, unknown, RegExp][] = [
      ['/v1/codebases', {}, /name/],
      ['/v1/codebases', { name: 'x', ownerId: 7 }, /owner_id/],
      ['/v1/sandboxes', { codebaseId: cb, permissions: [{ pattern: '**', permission: 9 }] }, /permission/],
      [
        '/v1/sandboxes',
        { codebaseId: cb, permissions: [{ pattern: '**', permission: 'PERMISSION_UNSPECIFIED' }] },
        /permission/,
      ],
      ['/v1/sandboxes', { codebaseId: cb, runtime: 7 }, /runtime/],
      ['/v1/sandboxes', { codebaseId: cb, resources: { memoryBytes: '12abc' } }, /memory_bytes/],
      ['/v1/sandboxes', { codebaseId: cb, resources: { diskBytes: -1 } }, /disk_bytes/],
      ['/v1/sandboxes', { codebaseId: cb, expiresIn: '10 minutes' }, /expires_in/],
      ['/v1/sandboxes', { codebaseId: '' }, /codebase_id/],
    ];
    for (const [path, body, message] of bad) {
      const answer = await call('POST', path, body);
      expectError(answer, 400, 'AF_INVALID_ARGUMENT', message);
      check(path === '/v1/codebases' ? 'CreateCodebase' : 'CreateSandbox', answer);
    }
    expect(await codebaseCount()).toBe(codebases);
    expect(await sandboxCount(cb)).toBe(0);
    // Unknown ids, in our format or the original's: NOT_FOUND.
    const missing = await call('GET', '/v1/sandboxes/sb_0123456789abcdef');
    expectError(missing, 404, 'AF_NOT_FOUND', /not found/);
    expect(missing.json).toEqual({
      code: 5,
      message: expect.any(String),
      details: [
        {
          '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
          reason: 'AF_NOT_FOUND',
          domain: 'agentfense',
          metadata: { id: 'sb_0123456789abcdef' },
        },
      ],
    });
    check('GetSandbox', missing);
    // Wrong state is FAILED_PRECONDITION (400): exec and stop of a PENDING sandbox.
    const sb = (await call('POST', '/v1/sandboxes', { codebaseId: cb })).json.id as string;
    expectError(await call('POST', `/v1/sandboxes/${sb}/exec`, { command: 'true' }), 400, 'AF_WRONG_STATE');
    expectError(await call('POST', `/v1/sandboxes/${sb}/stop`), 400, 'AF_WRONG_STATE', /not running/);
    expect((await call('GET', `/v1/sandboxes/${sb}`)).json.status).toBe('SANDBOX_STATUS_PENDING');
    await call('DELETE', `/v1/sandboxes/${sb}`);
  });
});
