// An MCP request over 10 MiB (a write_file of a large file, say) to `agentfense mcp` on stdio and to `/mcp`
// on `agentfense serve`. The SDK's stdio transport closed without a reply past its 10 MiB buffer, which
// ended the server and destroyed the sandbox with the agent's earlier changes. Defence: one message is at
// most 10 MiB on both faces; a larger one is skipped (never held whole) and answered with a JSON-RPC error
// naming the limit and how to send less, and the session goes on (mcp/stdio-transport.ts, mcp/http-route.ts).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { client, scratch, startServer, tokenFile } from '../helpers/http-fixture.js';
import { call, mountsOf, root, startStdio, waitGone } from '../helpers/mcp.js';

/** Just over the limit of 10 MiB. */
const OVERSIZED = 'x'.repeat(10 * 1024 * 1024 + 1024);
const LIMIT_ERROR = /at most 10485760 bytes \(10 MiB\)\. Send less per request/;

/** Changes before, the oversized call refused with the limit, and the session still at work after. */
async function expectRefusedAndAlive(mcp: Client): Promise<void> {
  const before = await call(mcp, 'write_file', { path: 'output/before.txt', content: 'written before\n' });
  expect(before.isError, before.text).not.toBe(true);

  await expect(
    mcp.callTool({ name: 'write_file', arguments: { path: 'output/big.txt', content: OVERSIZED } }),
  ).rejects.toThrow(LIMIT_ERROR);

  const read = await call(mcp, 'read_file', { path: 'output/before.txt' });
  expect(read.text).toContain('written before');
  const run = await call(mcp, 'run', { command: 'ls /workspace/output' });
  expect(run.text).toContain('before.txt');
  expect(run.text).not.toContain('big.txt');
  const changes = await call(mcp, 'changes');
  expect(changes.text).toContain('output/before.txt');
}

describe('an MCP request over 10 MiB', () => {
  it('stdio: answered with a JSON-RPC error naming the limit; the server, the sandbox and its changes live on', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'af-mcp-big-'));
    const repo = join(dir, 'repo');
    await execa('cp', ['-a', `${root}examples/demo-repo`, repo]);
    const server = await startStdio(repo, join(dir, 'data'));
    onTestFinished(async () => {
      await server.client.close();
      await waitGone(server.pid);
      const left = await mountsOf(dir);
      await rm(dir, { recursive: true, force: true });
      expect(left).toEqual([]);
    });
    await expectRefusedAndAlive(server.client);
    await expectRefusedAndAlive(server.client); // and again: nothing of the skipped bytes is left over
  });

  it('/mcp over HTTP: answered with a JSON-RPC error naming the limit; the session lives on', async () => {
    const { file, token } = await tokenFile(await scratch());
    const served = await startServer(['--token-file', file]);
    const api = client(served.url, token);
    const cb = ((await api('POST', '/v1/codebases', { name: 'big' })).json as { id: string }).id;
    for (const path of ['README.md', 'output/.keep']) {
      expect((await api('PUT', `/v1/codebases/${cb}/files/${path}`, 'x\n')).status).toBe(200);
    }
    const transport = new StreamableHTTPClientTransport(new URL(`${served.url}/mcp?codebase_id=${cb}`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    });
    const mcp = new Client({ name: 'agentfense-oversized-test', version: '1.0.0' });
    await mcp.connect(transport);
    onTestFinished(() => mcp.close());
    await expectRefusedAndAlive(mcp);
  });
});
