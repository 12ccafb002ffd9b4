// Another local user of the host against a default `agentfense serve` (root, loopback): loopback is not a
// boundary between the users of one machine, so a server that answered anyone on 127.0.0.1 let that user
// download a codebase's hidden `.env`, plant codebases and run commands as the sandbox user, over HTTP,
// gRPC and /mcp alike. By default serve now requires the bearer token it made in its 0700 data directory.
//
// A real throwaway host user (random name, removed afterwards) calls every face with what it can get:
// no token, and the token file's path (it may not read it). Every call must be refused before it does
// anything; root's client with the token is the positive control.
import { chmod } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, launchServer, scratch, stopAndCheck } from '../helpers/http-fixture.js';
import type { Served } from '../helpers/http-fixture.js';
import { createLocalUser, removeLocalUser } from '../helpers/local-user.js';
import type { HostUser } from '../helpers/local-user.js';

// The other user's client: a constant script (targets on stdin as JSON) using only node's own modules:
// fetch for HTTP and /mcp, a raw HTTP/2 gRPC call (an empty ListCodebasesRequest), and a read of the
// token file. It prints what each attempt got.
const ATTACK_SCRIPT = `
const fs = require('fs'), http2 = require('http2');
let input = '';
process.stdin.on('data', (c) => { input += c; });
process.stdin.on('end', async () => {
  const t = JSON.parse(input);
  const out = {};
  const http = async (method, path, body, headers = {}) => {
    const r = await fetch(t.url + path, { method, headers, body });
    return r.status;
  };
  out.list = await http('GET', '/v1/codebases');
  out.download = await http('GET', '/v1/codebases/' + t.codebase + '/files/.env');
  out.create = await http('POST', '/v1/codebases', JSON.stringify({ name: 'planted' }),
    { 'content-type': 'application/json' });
  out.mcp = await http('POST', '/mcp?codebase_id=' + t.codebase, JSON.stringify({
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
  }), { 'content-type': 'application/json', accept: 'application/json, text/event-stream' });
  out.grpc = await new Promise((resolve) => {
    const session = http2.connect('http://' + t.grpc);
    session.on('error', (e) => resolve('error ' + e.code));
    const req = session.request({
      ':method': 'POST', ':path': '/sandbox.v1.CodebaseService/ListCodebases',
      'content-type': 'application/grpc', te: 'trailers',
    });
    let status;
    req.on('response', (h) => { if (h['grpc-status'] !== undefined) status = h['grpc-status']; });
    req.on('trailers', (h) => { if (h['grpc-status'] !== undefined) status = h['grpc-status']; });
    req.on('data', () => undefined);
    req.on('end', () => { session.close(); resolve(status); });
    req.end(Buffer.alloc(5));
  });
  try { fs.readFileSync(t.tokenFile); out.tokenFile = 'read'; } catch (e) { out.tokenFile = e.code; }
  process.stdout.write(JSON.stringify(out));
});
`;

let user: HostUser | undefined;

beforeAll(async () => {
  user = await createLocalUser();
});
afterAll(() => removeLocalUser(user));

describe('another local user against a default `agentfense serve`', () => {
  it('is refused on HTTP, /mcp and gRPC, and cannot read the token', async () => {
    const dir = await scratch('af-serve-user-');
    await chmod(dir, 0o755); // the data directory's parent is open, as /var/lib is
    const served = await launchServer(['--grpc-listen', '127.0.0.1:0'], join(dir, 'data'));
    try {
      await attackAs(served);
    } finally {
      await stopAndCheck(served);
    }
  });
});

/** The attack, with root's setup and check around it. */
async function attackAs(served: Served): Promise<void> {
  const grpc = /grpc:\/\/(\S+) /.exec(served.output())?.[1];
  expect(grpc, served.output()).toBeDefined();
  // Root's client, with the token: a codebase with a secret the other user wants.
  const root = client(served.url, served.token);
  const created = await root('POST', '/v1/codebases', { name: 'app' });
  expect(created.status).toBe(200);
  const codebase = (created.json as { id: string }).id;
  expect((await root('PUT', `/v1/codebases/${codebase}/files/.env`, 'SECRET=1\n')).status).toBe(200);

  const attack = await execa(process.execPath, ['-e', ATTACK_SCRIPT], {
    uid: user?.uid,
    gid: user?.gid,
    cwd: '/',
    env: { PATH: '/usr/bin:/bin' },
    extendEnv: false,
    input: JSON.stringify({
      url: served.url,
      grpc,
      codebase,
      tokenFile: join(served.dataDir, 'api-token'),
    }),
  });
  expect(JSON.parse(attack.stdout)).toEqual({
    list: 401,
    download: 401,
    create: 401,
    mcp: 401,
    grpc: '16', // UNAUTHENTICATED
    tokenFile: 'EACCES',
  });
  // Nothing was planted; root with the token still works.
  const listed = await root('GET', '/v1/codebases');
  expect((listed.json as { codebases: { name: string }[] }).codebases.map((c) => c.name)).toEqual(['app']);
}
