// An API client and a local user on the same data directory (the default one, for both): the user's
// `agentfense run --keep` links their own directory in place, and the API saw that codebase as any other,
// so a client with the server's token listed it, downloaded its hidden `.env` (codebase file reads have no
// rules), and created a full-access sandbox over it whose commit wrote into the user's directory. A
// codebase linked by a local process is now the local user's: every API face answers "not found" for it,
// for its sandboxes and their sessions, exactly as for an id that does not exist.
//
// Real processes: a kept one-shot `run` over a scratch directory, then `agentfense serve` on the same data
// directory, attacked over HTTP, gRPC and /mcp with the server's own token.
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { describe, expect, it, onTestFinished } from 'vitest';
import { codeOf, grpcClient, status } from '../helpers/grpc-client.js';
import { bin, client, expectError, launchServer, scratch, stopAndCheck } from '../helpers/http-fixture.js';
import type { Served } from '../helpers/http-fixture.js';

interface Ids {
  readonly codebase: string;
  readonly sandbox: string;
}

/** The user's kept run over `repo`: its sandbox and the codebase it linked (as the local CLI lists it). */
async function keptRun(repo: string, data: string): Promise<Ids> {
  const run = await execa(
    process.execPath,
    [bin, 'run', repo, '--keep', '--json', '--data', data, '--', 'true'],
    { reject: false, env: { AGENTFENSE_RUN_HELPER: '0' } },
  );
  expect(run.exitCode, run.stderr).toBe(0);
  const sandbox = (JSON.parse(run.stdout) as { sandboxId: string }).sandboxId;
  const listed = await execa(process.execPath, [bin, 'codebase', 'list', '--json', '--data', data]);
  const linked = (JSON.parse(listed.stdout) as { id: string; kind: string; path: string }[]).filter(
    (c) => c.kind === 'linked',
  );
  expect(linked.map((c) => c.path)).toEqual([repo]);
  return { codebase: (linked[0] as { id: string }).id, sandbox };
}

describe('a locally linked codebase through the API faces', () => {
  it('is not listed, not readable, and no sandbox can be made over it (HTTP, gRPC, /mcp)', async () => {
    const dir = await scratch('af-api-reach-');
    const repo = join(dir, 'repo');
    await mkdir(join(repo, 'src'), { recursive: true });
    await writeFile(join(repo, '.env'), 'SECRET=local-only\n', { mode: 0o600 });
    await writeFile(join(repo, 'src', 'app.py'), 'print("mine")\n');
    const data = join(dir, 'data');
    const local = await keptRun(repo, data);

    const served = await launchServer(['--grpc-listen', '127.0.0.1:0'], data);
    try {
      await attack(served, local);
    } finally {
      await stopAndCheck(served);
    }
    // The user's directory is exactly as it was.
    expect((await readdir(repo)).sort()).toEqual(['.env', 'src']);
    expect(await readFile(join(repo, 'src', 'app.py'), 'utf8')).toBe('print("mine")\n');
    // ... and the local CLI still has its sandbox.
    const inspect = await execa(process.execPath, [bin, 'sandbox', 'inspect', local.sandbox, '--data', data]);
    expect(inspect.stdout).toContain(local.sandbox);
  });
});

async function attack(served: Served, local: Ids): Promise<void> {
  const call = client(served.url, served.token);
  // Positive control: a codebase made through the API is reachable.
  const shared = (await call('POST', '/v1/codebases', { name: 'shared' })).json as { id: string };

  const codebases = (await call('GET', '/v1/codebases')).json as { codebases: { id: string }[] };
  expect(codebases.codebases.map((c) => c.id)).toEqual([shared.id]);
  expectError(await call('GET', `/v1/codebases/${local.codebase}`), 404, 'AF_NOT_FOUND');
  expectError(await call('GET', `/v1/codebases/${local.codebase}/files/.env`), 404, 'AF_NOT_FOUND');
  expectError(await call('GET', `/v1/codebases/${local.codebase}/files?recursive=true`), 404, 'AF_NOT_FOUND');
  expectError(await call('PUT', `/v1/codebases/${local.codebase}/files/x`, 'x'), 404, 'AF_NOT_FOUND');
  expectError(await call('DELETE', `/v1/codebases/${local.codebase}`), 404, 'AF_NOT_FOUND');
  const fullAccess = { codebase_id: local.codebase, preset: 'full-access', start: true };
  expectError(await call('POST', '/v1/sandboxes', fullAccess), 404, 'AF_NOT_FOUND');

  // The kept sandbox over it: not listed, not startable, nothing of it readable.
  const sandboxes = (await call('GET', '/v1/sandboxes')).json as { sandboxes: { id: string }[] };
  expect(sandboxes.sandboxes).toEqual([]);
  for (const [method, path, body] of [
    ['GET', `/v1/sandboxes/${local.sandbox}`, undefined],
    ['POST', `/v1/sandboxes/${local.sandbox}/start`, undefined],
    ['POST', `/v1/sandboxes/${local.sandbox}/exec`, { command: 'cat /workspace/.env' }],
    ['POST', `/v1/sandboxes/${local.sandbox}/commit`, {}],
    ['GET', `/v1/sandboxes/${local.sandbox}/logs`, undefined],
    ['POST', `/v1/sandboxes/${local.sandbox}/sessions`, {}],
    ['DELETE', `/v1/sandboxes/${local.sandbox}`, undefined],
  ] as const) {
    expectError(await call(method, path, body), 404, 'AF_NOT_FOUND');
  }

  // /mcp: a session over it is refused at initialize.
  const mcp = await call(
    'POST',
    `/mcp?codebase_id=${local.codebase}&preset=full-access&allow_commit=true`,
    {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    },
    { accept: 'application/json, text/event-stream' },
  );
  expect(mcp.status, mcp.text).toBe(404);

  // gRPC, the same.
  const target = /grpc:\/\/(\S+) /.exec(served.output())?.[1] as string;
  const grpc = grpcClient(target, served.token);
  onTestFinished(() => grpc.close());
  const listed = (await grpc.unary('codebase', 'ListCodebases', {})) as { codebases: { id: string }[] };
  expect(listed.codebases.map((c) => c.id)).toEqual([shared.id]);
  expect(await codeOf(grpc.unary('codebase', 'GetCodebase', { codebase_id: local.codebase }))).toBe(
    status.NOT_FOUND,
  );
  expect(
    await codeOf(grpc.stream('codebase', 'DownloadFile', { codebase_id: local.codebase, file_path: '.env' })),
  ).toBe(status.NOT_FOUND);
  const created = grpc.unary('sandbox', 'CreateSandbox', {
    codebase_id: local.codebase,
    permissions: [{ pattern: '**', permission: 'PERMISSION_WRITE' }],
  });
  expect(await codeOf(created)).toBe(status.NOT_FOUND);
  expect(await codeOf(grpc.unary('sandbox', 'GetSandbox', { sandbox_id: local.sandbox }))).toBe(
    status.NOT_FOUND,
  );
  const sandboxesOverGrpc = (await grpc.unary('sandbox', 'ListSandboxes', {})) as { sandboxes: unknown[] };
  expect(sandboxesOverGrpc.sandboxes).toEqual([]);
}
