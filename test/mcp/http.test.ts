// `/mcp` on a real `agentfense serve` (token required) with the SDK's StreamableHTTP client: one sandbox
// per MCP session over the codebase named at initialize, the demo's story through it, sessions isolated
// from each other, a closed session's sandbox destroyed, bad initializations refused with a reason, and
// the server's shutdown destroying open sessions' sandboxes (no mount or process left).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { client, scratch, startServer, tokenFile } from '../helpers/http-fixture.js';
import { call, errorCode } from '../helpers/mcp.js';

interface Listed {
  readonly id: string;
  readonly labels: Record<string, string>;
}

async function connect(
  url: string,
  token: string,
  query: string,
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp${query}`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const mcp = new Client({ name: 'agentfense-http-test', version: '1.0.0' });
  await mcp.connect(transport);
  return { client: mcp, transport };
}

describe('MCP over streamable HTTP at /mcp', () => {
  it('one sandbox per session over the named codebase, behind the token, destroyed on close and shutdown', async () => {
    const { file, token } = await tokenFile(await scratch());
    const served = await startServer(['--token-file', file]);
    const api = client(served.url, token);
    const created = (await api('POST', '/v1/codebases', { name: 'demo' })).json as { id: string };
    const cb = created.id;
    for (const [path, content] of [
      ['README.md', '# demo\n'],
      ['src/app.py', 'print("hello")\n'],
      ['.env', 'SECRET=1\n'],
      ['secrets/deploy.pem', 'KEY\n'],
      ['output/.keep', ''],
    ] as const) {
      expect((await api('PUT', `/v1/codebases/${cb}/files/${path}`, content)).status).toBe(200);
    }
    const mcpSandboxes = async (): Promise<string[]> => {
      const listed = ((await api('GET', '/v1/sandboxes')).json as { sandboxes: Listed[] }).sandboxes;
      return listed.filter((s) => s.labels['agentfense.client'] === 'mcp-http').map((s) => s.id);
    };

    // The same token as the rest of the API.
    const anonymous = await fetch(`${served.url}/mcp?codebase_id=${cb}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }),
    });
    expect(anonymous.status).toBe(401);

    // Initialize without a codebase, or with one that does not exist: refused with a reason, nothing created.
    await expect(connect(served.url, token, '')).rejects.toThrow(/codebase_id/);
    await expect(
      connect(served.url, token, '?codebase_id=cb_00000000-0000-4000-8000-000000000000'),
    ).rejects.toThrow(/AF_NOT_FOUND|AF_INVALID_ARGUMENT/);
    expect(await mcpSandboxes()).toEqual([]);

    const a = await connect(served.url, token, `?codebase_id=${cb}`);
    const b = await connect(served.url, token, `?codebase_id=${cb}&allow_commit=true`);
    expect((await mcpSandboxes()).length).toBe(2);
    const toolsA = (await a.client.listTools()).tools.map((t) => t.name);
    const toolsB = (await b.client.listTools()).tools.map((t) => t.name);
    expect(toolsA).not.toContain('commit');
    expect(toolsB).toContain('commit');

    // The demo's story through session A.
    const ls = await call(a.client, 'run', { command: 'ls -A /workspace' });
    expect(ls.data.stdout).toBe('README.md\noutput\nsrc\n');
    expect(errorCode(await call(a.client, 'read_file', { path: '.env' }))).toBe('AF_NOT_FOUND');
    expect(errorCode(await call(a.client, 'write_file', { path: 'src/app.py', content: 'x' }))).toBe(
      'AF_PERMISSION_DENIED',
    );
    expect(
      (await call(a.client, 'write_file', { path: 'output/r.txt', content: 'from a\n' })).isError,
    ).toBeFalsy();
    expect((await call(a.client, 'changes')).text).toContain('+from a');
    // Bad input over HTTP too.
    expect(errorCode(await call(a.client, 'nope'))).toBe('AF_NOT_FOUND');
    expect(errorCode(await call(a.client, 'read_file', { path: '../../etc/passwd' }))).toBe(
      'AF_INVALID_ARGUMENT',
    );

    // Session B has its own sandbox: A's write is not there.
    expect(errorCode(await call(b.client, 'read_file', { path: 'output/r.txt' }))).toBe('AF_NOT_FOUND');
    expect((await call(b.client, 'changes')).text).toContain('no changes');

    // Closing session A (DELETE) destroys its sandbox; B keeps working.
    await a.transport.terminateSession();
    await a.client.close();
    expect((await mcpSandboxes()).length).toBe(1);
    expect((await call(b.client, 'run', { command: 'echo b' })).data.stdout).toBe('b\n');

    // An unknown session id is refused.
    const stale = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': 'no-such-session',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(stale.status).toBe(404);

    // Shutdown with B open: its sandbox is destroyed (startServer's check: exit 0, no mount, no process).
    const [sandboxB] = await mcpSandboxes();
    const { output, exitCode } = await served.stop();
    expect(exitCode, output).toBe(0);
    expect(output).not.toContain(sandboxB);
    await b.client.close().catch(() => undefined);
  });
});
