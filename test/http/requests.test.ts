// The HTTP API's handling of bad and edge-case requests over real HTTP on loopback (`agentfense serve`
// as a process): malformed JSON, unknown routes, oversized bodies, bad ids, path traversal in uploads,
// validation messages, enum spellings both ways, pagination, raw file transfer of a large file.
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment --
   Answers are parsed JSON (`any`); each one's shape is checked against the served OpenAPI schema (check()). */
import { createHash, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  bearer,
  client,
  expectError,
  rawRequest,
  sendHeadOnly,
  startServer,
  useServer,
} from '../helpers/http-fixture.js';

const api = useServer('af-http-requests-');
const { call, check } = api;

async function newCodebase(owner = 'tester'): Promise<string> {
  const answer = await call('POST', '/v1/codebases', { name: 'repo', owner_id: owner });
  expect(answer.status, answer.text).toBe(200);
  check('CreateCodebase', answer);
  return answer.json.id as string;
}

describe('malformed requests', () => {
  it('answers malformed JSON with 400 AF_INVALID_ARGUMENT', async () => {
    const answer = await call('POST', '/v1/codebases', '{"name": "x"', {
      'content-type': 'application/json',
    });
    expectError(answer, 400, 'AF_INVALID_ARGUMENT', /malformed JSON/);
    check('CreateCodebase', answer);
  });

  it('reads a body as JSON whatever its content type says (curl -d sends a form type), as the gateway', async () => {
    const form = await call('POST', '/v1/codebases', 'name=x', {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expectError(form, 400, 'AF_INVALID_ARGUMENT', /malformed JSON/);
    const json = await call('POST', '/v1/codebases', '{"name":"typed-as-form"}', {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(json.status, json.text).toBe(200);
    expect(json.json.name).toBe('typed-as-form');
    await call('DELETE', `/v1/codebases/${json.json.id as string}`);
  });

  it('validates bodies strictly, naming the field', async () => {
    expectError(await call('POST', '/v1/codebases', {}), 400, 'AF_INVALID_ARGUMENT', /name/);
    expectError(await call('POST', '/v1/codebases', { name: 5 }), 400, 'AF_INVALID_ARGUMENT', /name.*string/);
    expectError(
      await call('POST', '/v1/codebases', { name: 'x', ownerId: 5 }),
      400,
      'AF_INVALID_ARGUMENT',
      /owner_id.*string/,
    );
    expectError(await call('POST', '/v1/codebases', [1, 2]), 400, 'AF_INVALID_ARGUMENT', /object/);
    expectError(await call('POST', '/v1/codebases'), 400, 'AF_INVALID_ARGUMENT', /body/);
  });

  it('answers an unknown route or method with 404 AF_NOT_FOUND naming it', async () => {
    expectError(
      await call('GET', '/v1/nothing-here'),
      404,
      'AF_NOT_FOUND',
      /no route GET \/v1\/nothing-here/,
    );
    expectError(await call('GET', '/'), 404, 'AF_NOT_FOUND');
    expectError(await call('PATCH', '/v1/codebases'), 404, 'AF_NOT_FOUND', /PATCH/);
    expectError(await call('POST', '/v1/sandboxes/x/explode', {}), 404, 'AF_NOT_FOUND');
  });

  it('answers a JSON body declared over the limit with 413 before reading any of it', async () => {
    const answer = await sendHeadOnly(api.served.url, '/v1/codebases', {
      ...bearer(api.served),
      'content-type': 'application/json',
      'content-length': String(16 * 1024 * 1024 + 1),
    });
    expect(answer.status).toBe(413);
    expectError(answer, 413, 'AF_INVALID_ARGUMENT', /too large/);
  });
});

describe('ids', () => {
  it("answers any unknown id with 404, ours or the original's format or garbage, for every kind", async () => {
    for (const path of ['/v1/codebases/', '/v1/sandboxes/', '/v1/sessions/']) {
      expectError(await call('GET', `${path}nope`), 404, 'AF_NOT_FOUND', / "nope" not found/);
    }
    expectError(await call('GET', '/v1/sandboxes/sb_0123456789abcdef'), 404, 'AF_NOT_FOUND');
    expectError(await call('GET', '/v1/codebases/cb_0123456789abcdef'), 404, 'AF_NOT_FOUND');
    expectError(await call('POST', '/v1/sandboxes/sb_0123456789abcdef/start'), 404, 'AF_NOT_FOUND');
    expectError(await call('GET', '/v1/codebases/sb_' + randomUUID()), 404, 'AF_NOT_FOUND');
    expectError(await call('GET', `/v1/codebases/cb_${randomUUID()}`), 404, 'AF_NOT_FOUND', /not found/);
    expectError(await call('GET', `/v1/sandboxes/sb_${randomUUID()}`), 404, 'AF_NOT_FOUND');
    expectError(await call('GET', `/v1/sessions/ses_${randomUUID()}`), 404, 'AF_NOT_FOUND');
    expectError(await call('DELETE', `/v1/sandboxes/sb_${randomUUID()}`), 404, 'AF_NOT_FOUND');
    expectError(
      await call('POST', `/v1/sandboxes/sb_${randomUUID()}/exec`, { command: 'true' }),
      404,
      'AF_NOT_FOUND',
    );
    expectError(
      await call('POST', '/v1/sandboxes', { codebase_id: `cb_${randomUUID()}` }),
      404,
      'AF_NOT_FOUND',
    );
    // An id is never used as a path: a traversal attempt is just an id that names nothing.
    const answer = await rawRequest(
      api.served.url,
      'GET',
      '/v1/codebases/..%2F..%2Fetc',
      undefined,
      bearer(api.served),
    );
    expect(answer.status).toBe(404);
  });
});

describe('raw file transfer', () => {
  it('refuses traversal, absolute paths, NUL bytes and unnormalised paths with 400, writing nothing', async () => {
    const id = await newCodebase();
    const bad = [
      '/../escape.txt',
      '/a/../../escape.txt',
      '/%2e%2e/escape.txt',
      '/a/%2E%2E/%2e%2e/escape.txt',
      '/..%2Fescape.txt',
      '//etc/passwd',
      '/%2Fetc%2Fpasswd',
      '/a%00b',
      '/a//b',
      '/a/./b',
      '/dir/',
    ];
    for (const path of bad) {
      const answer = await rawRequest(
        api.served.url,
        'PUT',
        `/v1/codebases/${id}/files${path}`,
        'x',
        bearer(api.served),
      );
      expect(answer.status, `${path}: ${JSON.stringify(answer.json)}`).toBe(400);
      expectError(answer, 400, 'AF_INVALID_ARGUMENT');
      const get = await rawRequest(
        api.served.url,
        'GET',
        `/v1/codebases/${id}/files${path}`,
        undefined,
        bearer(api.served),
      );
      expect(get.status, path).toBe(400);
    }
    const listing = await call('GET', `/v1/codebases/${id}/files?recursive=true`);
    expect(listing.json).toEqual({ files: [] });
    expectError(await call('GET', `/v1/codebases/${id}/files?path=../..`), 400, 'AF_INVALID_ARGUMENT');
    expect((await call('GET', `/v1/codebases/${id}`)).json).toMatchObject({ fileCount: 0, size: '0' });
  });

  it('streams a 64 MiB upload and download byte for byte, and updates the metadata', async () => {
    const id = await newCodebase();
    const content = Buffer.alloc(64 * 1024 * 1024);
    for (let i = 0; i < content.length; i += 4096) content.writeUInt32LE(i ^ 0x5bd1e995, i);
    const upload = await call('PUT', `/v1/codebases/${id}/files/data/big%20file.bin`, content);
    expect(upload.status, upload.text).toBe(200);
    check('UploadFile', upload);
    expect(upload.json).toMatchObject({
      path: 'data/big file.bin',
      size: String(content.length),
      isDir: false,
    });
    const response = await fetch(`${api.served.url}/v1/codebases/${id}/files/data/big%20file.bin`, {
      headers: bearer(api.served),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/octet-stream');
    expect(Number(response.headers.get('content-length'))).toBe(content.length);
    const back = Buffer.from(await response.arrayBuffer());
    const digest = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
    expect(digest(back)).toBe(digest(content));
    const info = await call('GET', `/v1/codebases/${id}`);
    check('GetCodebase', info);
    expect(info.json).toMatchObject({ fileCount: 1, size: String(content.length) });
    const files = await call('GET', `/v1/codebases/${id}/files?path=/data`);
    check('ListFiles', files);
    expect(files.json.files).toEqual([
      {
        path: 'data/big file.bin',
        size: String(content.length),
        isDir: false,
        modifiedAt: expect.any(String),
      },
    ]);
    // Empty files, files without a content type, and replacing a file.
    expect((await call('PUT', `/v1/codebases/${id}/files/empty`, '')).json).toMatchObject({ size: '0' });
    await call('PUT', `/v1/codebases/${id}/files/data/big%20file.bin`, 'small');
    expect((await call('GET', `/v1/codebases/${id}`)).json).toMatchObject({ fileCount: 2, size: '5' });
    expectError(await call('GET', `/v1/codebases/${id}/files/missing.txt`), 404, 'AF_NOT_FOUND');
    expectError(await call('GET', `/v1/codebases/${id}/files/data`), 400, 'AF_INVALID_ARGUMENT');
  });
});

describe('upload limit', () => {
  it('refuses a file over --max-upload-bytes with 413, from its length or while streaming, writing nothing', async () => {
    const limited = await startServer(['--max-upload-bytes', String(1024 * 1024)]);
    const own = client(limited.url, limited.token);
    const id = (await own('POST', '/v1/codebases', { name: 'small' })).json.id as string;
    const declared = await sendHeadOnly(
      limited.url,
      `/v1/codebases/${id}/files/big.bin`,
      { ...bearer(limited), 'content-length': String(2 * 1024 * 1024) },
      'PUT',
    );
    expect(declared.status).toBe(413);
    expectError(declared, 413, 'AF_INVALID_ARGUMENT', /upload limit of 1048576 bytes/);
    // Without a length, the limit is found while streaming.
    const streamed = await rawRequest(
      limited.url,
      'PUT',
      `/v1/codebases/${id}/files/big.bin`,
      Buffer.alloc(1024 * 1024 + 1),
      { ...bearer(limited), 'transfer-encoding': 'chunked' },
    );
    expect(streamed.status).toBe(413);
    expect((await own('GET', `/v1/codebases/${id}/files`)).json).toEqual({ files: [] });
    const exact = await own('PUT', `/v1/codebases/${id}/files/ok.bin`, Buffer.alloc(1024 * 1024));
    expect(exact.status, exact.text).toBe(200);
    expect((await own('GET', `/v1/codebases/${id}`)).json).toMatchObject({
      fileCount: 1,
      size: String(1024 * 1024),
    });
  });
});

describe('listings', () => {
  it('pages codebases by owner with nextPageToken (query names in either spelling)', async () => {
    const owner = `owner-${randomUUID()}`;
    const ids = [await newCodebase(owner), await newCodebase(owner), await newCodebase(owner)];
    const seen: string[] = [];
    let token = '';
    let pages = 0;
    do {
      const query =
        pages === 0
          ? `owner_id=${owner}&page_size=2&page_token=${token}`
          : `ownerId=${owner}&pageSize=2&pageToken=${token}`;
      const page = await call('GET', `/v1/codebases?${query}`);
      check('ListCodebases', page);
      seen.push(...(page.json.codebases as { id: string }[]).map((c) => c.id));
      token = page.json.nextPageToken as string;
      pages += 1;
    } while (token !== '');
    expect(pages).toBe(2);
    expect(seen).toEqual(ids);
    expectError(await call('GET', '/v1/codebases?page_size=-1'), 400, 'AF_INVALID_ARGUMENT');
    expectError(await call('GET', '/v1/codebases?pageSize=1001'), 400, 'AF_INVALID_ARGUMENT');
    expectError(await call('GET', '/v1/codebases?page_size=ten'), 400, 'AF_INVALID_ARGUMENT');
    expectError(
      await call('GET', '/v1/codebases?page_token=garbage'),
      400,
      'AF_INVALID_ARGUMENT',
      /page token/,
    );
  });

  it('filters sandboxes by codebase, labels and status in either spelling', async () => {
    const cb = await newCodebase();
    const make = async (labels: Record<string, string>): Promise<string> => {
      const answer = await call('POST', '/v1/sandboxes', { codebase_id: cb, labels });
      check('CreateSandbox', answer);
      return answer.json.id as string;
    };
    const a = await make({ team: 'red', tier: 'gold' });
    const b = await make({ team: 'red' });
    await make({ team: 'blue' });
    const ids = async (query: string): Promise<string[]> => {
      const answer = await call('GET', `/v1/sandboxes?codebase_id=${cb}&${query}`);
      expect(answer.status, answer.text).toBe(200);
      check('ListSandboxes', answer);
      return (answer.json.sandboxes as { id: string }[]).map((s) => s.id);
    };
    expect(await ids('labels=team:red')).toEqual([a, b]);
    expect(await ids('labels=team:red,tier:gold')).toEqual([a]);
    expect(await ids('labels=team:red&labels=tier:gold')).toEqual([a]);
    expect(await ids('status=pending&labels=team:red')).toEqual([a, b]);
    expect(await ids('status=SANDBOX_STATUS_PENDING&page_size=1')).toEqual([a]);
    expect(await ids('status=running')).toEqual([]);
    expect(await ids('status=1&labels=team:red')).toEqual([a, b]);
    expect(await ids('status=SANDBOX_STATUS_UNSPECIFIED&labels=team:red')).toEqual([a, b]);
    expectError(await call('GET', '/v1/sandboxes?status=sleeping'), 400, 'AF_INVALID_ARGUMENT', /status/);
    expectError(await call('GET', '/v1/sandboxes?labels=nocolon'), 400, 'AF_INVALID_ARGUMENT', /key:value/);
    // Clean up: a codebase in use cannot be deleted (FAILED_PRECONDITION), then it can.
    expectError(await call('DELETE', `/v1/codebases/${cb}`), 400, 'AF_WRONG_STATE', /destroy them first/);
    for (const id of await ids('')) expect((await call('DELETE', `/v1/sandboxes/${id}`)).json).toEqual({});
    const deleted = await call('DELETE', `/v1/codebases/${cb}`);
    check('DeleteCodebase', deleted);
    expectError(await call('GET', `/v1/codebases/${cb}`), 404, 'AF_NOT_FOUND');
  });
});

describe('enum mapping', () => {
  it('accepts long and short spellings on input and answers with the long ones', async () => {
    const cb = await newCodebase();
    const answer = await call('POST', '/v1/sandboxes', {
      codebase_id: cb,
      runtime: 'RUNTIME_TYPE_BWRAP',
      permissions: [
        { pattern: '**', type: 'PATTERN_TYPE_GLOB', permission: 'PERMISSION_READ' },
        { pattern: '/out/', type: 'directory', permission: 'write', priority: 10 },
        { pattern: '/secret.txt', type: 'PATTERN_TYPE_FILE', permission: 'none', priority: 100 },
        { pattern: '/docs/', permission: 'PERMISSION_VIEW' },
        { pattern: '*.md', type: 'PATTERN_TYPE_UNSPECIFIED', permission: 'read' },
      ],
      resources: { memory_bytes: 256 * 1024 * 1024, pids_limit: 64 },
      expires_in: '3600s',
    });
    expect(answer.status, answer.text).toBe(200);
    check('CreateSandbox', answer);
    expect(answer.json).toMatchObject({
      status: 'SANDBOX_STATUS_PENDING',
      runtime: 'RUNTIME_TYPE_BWRAP',
      resources: {
        memoryBytes: String(256 * 1024 * 1024),
        pidsLimit: '64',
      },
      permissions: [
        { pattern: '**', type: 'PATTERN_TYPE_GLOB', permission: 'PERMISSION_READ', priority: 0 },
        { pattern: '/out/', type: 'PATTERN_TYPE_DIRECTORY', permission: 'PERMISSION_WRITE', priority: 10 },
        { pattern: '/secret.txt', type: 'PATTERN_TYPE_FILE', permission: 'PERMISSION_NONE', priority: 100 },
        { pattern: '/docs/', permission: 'PERMISSION_VIEW', priority: 0 },
        { pattern: '*.md', permission: 'PERMISSION_READ', priority: 0 },
      ],
    });
    const expires = Date.parse(answer.json.expiresAt as string) - Date.parse(answer.json.createdAt as string);
    expect(expires).toBe(3_600_000);
    const short = await call('POST', '/v1/sandboxes', {
      codebase_id: cb,
      runtime: 'bwrap',
      preset: 'read-only',
    });
    expect(short.json).toMatchObject({ runtime: 'RUNTIME_TYPE_BWRAP', status: 'SANDBOX_STATUS_PENDING' });
    expect(short.json.permissions.length).toBeGreaterThan(0);
    for (const rule of short.json.permissions as { permission: string }[]) {
      expect(rule.permission).toMatch(/^PERMISSION_(NONE|VIEW|READ|WRITE)$/);
    }
    for (const id of [answer.json.id as string, short.json.id as string])
      await call('DELETE', `/v1/sandboxes/${id}`);
  });

  it('refuses unknown spellings, naming what is accepted', async () => {
    const cb = await newCodebase();
    const bad = async (body: Record<string, unknown>, message: RegExp): Promise<void> =>
      expectError(
        await call('POST', '/v1/sandboxes', { codebase_id: cb, ...body }),
        400,
        'AF_INVALID_ARGUMENT',
        message,
      );
    await bad({ permissions: [{ pattern: '**', permission: 'PERMISSION_ADMIN' }] }, /permission/);
    await bad({ permissions: [{ pattern: '**', permission: 'READ' }] }, /permission/);
    await bad({ permissions: [{ pattern: '**', permission: 'read', type: 'regex' }] }, /type/);
    await bad({ permissions: [{ pattern: '**', permission: 'PERMISSION_UNSPECIFIED' }] }, /permission/);
    await bad({ permissions: [{ pattern: '**', permission: 9 }] }, /permission/);
    await bad({ runtime: 'RUNTIME_TYPE_FIRECRACKER' }, /runtime/);
    await bad({ permissions: [{ pattern: '**', permission: 'read' }], preset: 'read-only' }, /preset|rules/);
    await bad({ expires_in: '10 minutes' }, /expires_in/);
    await bad({ expires_in: -5 }, /expires_in/);
    await bad({ resources: { memory_bytes: -1 } }, /memory_bytes/);
    await bad({ resources: { memoryBytes: '12abc' } }, /memory_bytes/);
    await bad({ labels: { a: 1 } }, /labels/);
    await bad({ image: 'debian:12' }, /image/);
    const preset = await call('POST', '/v1/sandboxes', { codebase_id: cb, preset: 'no-such-preset' });
    expectError(preset, 404, 'AF_NOT_FOUND', /no-such-preset.*agent-safe/);
    expect((await call('GET', `/v1/sandboxes?codebase_id=${cb}`)).json.sandboxes).toEqual([]);
  });
});

describe('state errors', () => {
  it('answers operations on a sandbox that is not running with 400 FAILED_PRECONDITION', async () => {
    const cb = await newCodebase();
    const sb = (await call('POST', '/v1/sandboxes', { codebase_id: cb })).json.id as string;
    const exec = await call('POST', `/v1/sandboxes/${sb}/exec`, { command: 'true' });
    expectError(exec, 400, 'AF_WRONG_STATE', /PENDING/);
    check('Exec', exec);
    expectError(
      await call('POST', `/v1/sandboxes/${sb}/exec/stream`, { command: 'true' }),
      400,
      'AF_WRONG_STATE',
    );
    expectError(await call('POST', `/v1/sandboxes/${sb}/sessions`, {}), 400, 'AF_WRONG_STATE');
    expectError(await call('POST', `/v1/sandboxes/${sb}/exec`, { command: [] }), 400, 'AF_INVALID_ARGUMENT');
    expectError(
      await call('POST', `/v1/sandboxes/${sb}/exec`, { command: 'x', timeout: '1m' }),
      400,
      'AF_INVALID_ARGUMENT',
    );
    const logs = await call('GET', `/v1/sandboxes/${sb}/logs`);
    check('Logs', logs);
    expect(logs.json).toEqual({ lines: [] });
    const audit = await call('GET', `/v1/sandboxes/${sb}/audit`);
    check('Audit', audit);
    expect(audit.json).toEqual({ events: [] });
    expect((await call('GET', `/v1/sandboxes/${sb}/sessions`)).json).toEqual({ sessions: [] });
    await call('DELETE', `/v1/sandboxes/${sb}`);
  });
});
