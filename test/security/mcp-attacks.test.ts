// A hostile MCP client (the model itself, or whatever it was tricked into sending) against `agentfense mcp`
// over stdio, preset agent-safe, on a copy of examples/demo-repo: path traversal in the file tools, hidden
// paths reached by detours, oversized and malformed inputs, arguments naming other sandboxes. Each is
// refused with a clear error (a stable AF_ code and a message saying what to pass instead), and nothing
// leaks: no host file, no hidden content, no host path of the data directory or the codebase.
// The path layer under test is packages/control/src/mcp/paths.ts; the rules are the worker's.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, errorCode, mountsOf, root, startStdio, waitGone } from '../helpers/mcp.js';
import type { StdioServer } from '../helpers/mcp.js';

let scratch: string;
let repo: string;
let data: string;
let server: StdioServer;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-mcp-attacks-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await execa('cp', ['-a', `${root}examples/demo-repo`, repo]);
  server = await startStdio(repo, data);
}, 60_000);

afterAll(async () => {
  if (server !== undefined) {
    await server.client.close();
    await waitGone(server.pid);
  }
  const left = await mountsOf(scratch);
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

/** Nothing of the host or of hidden files in what the server answered (beyond the client's own input). */
function expectNoLeak(answer: string, input = ''): void {
  const text = input === '' ? answer : answer.split(input).join('<input>');
  expect(text).not.toContain('root:x:0:0'); // a passwd file, the host's or the sandbox's
  expect(text).not.toContain(scratch); // the codebase's and the data directory's host paths
  expect(text).not.toMatch(/hunter2|demo-token|AKIADEMO/); // the demo's secrets
}

describe('a hostile MCP client', () => {
  it('path traversal in every file tool is refused as invalid input, naming what to pass instead', async () => {
    const escapes = [
      '../../etc/passwd',
      '..',
      'src/../../etc/shadow',
      '/workspace/../etc/passwd',
      '/workspace/src/../../../etc/passwd',
      '/etc/passwd',
      `${repo}/README.md`,
      '/proc/self/environ',
    ];
    for (const path of escapes) {
      for (const [tool, args] of [
        ['read_file', { path }],
        ['write_file', { path, content: 'x' }],
        ['list_files', { path }],
      ] as const) {
        const r = await call(server.client, tool, args);
        expect(errorCode(r), `${tool} ${path}`).toBe('AF_INVALID_ARGUMENT');
        expect(r.text, `${tool} ${path}`).toMatch(/outside the codebase|climbs out of the codebase/);
        expectNoLeak(r.text, JSON.stringify(path));
      }
    }
  });

  it('a NUL byte in a path is refused, not truncated', async () => {
    const r = await call(server.client, 'read_file', { path: 'README.md\0../../etc/passwd' });
    expect(errorCode(r)).toBe('AF_INVALID_ARGUMENT');
    expect(r.text).toMatch(/NUL/);
  });

  it('hidden paths stay hidden through detours: "..", "./", absolute forms, listings of any depth', async () => {
    for (const path of [
      '.env',
      './.env',
      'src/../.env',
      '/workspace/.env',
      'output/../secrets/database-url.txt',
      'secrets',
    ]) {
      const r = await call(server.client, 'read_file', { path });
      expect(errorCode(r), path).toBe('AF_NOT_FOUND');
      expectNoLeak(r.text);
    }
    const listing = await call(server.client, 'list_files', { path: '.', max_depth: 20 });
    expect(listing.isError).not.toBe(true);
    expect(listing.text).toContain('README.md');
    expect(listing.text).not.toMatch(/\.env|secrets|\.pem|credentials/);
    const dotdot = await call(server.client, 'list_files', { path: 'src/..', max_depth: 20 });
    expect(dotdot.text).not.toMatch(/\.env|secrets/);
    // Writing a hidden path neither reveals it nor creates it.
    const write = await call(server.client, 'write_file', { path: 'output/../.env', content: 'x' });
    expect(errorCode(write)).toMatch(/AF_NOT_FOUND|AF_PERMISSION_DENIED/);
    expectNoLeak(write.text);
  });

  it('arguments the tools do not take (another sandbox, a host directory) are refused, not ignored', async () => {
    for (const [tool, args] of [
      ['read_file', { path: 'README.md', sandbox_id: 'sb_00000000-0000-0000-0000-000000000000' }],
      ['run', { command: 'true', sandbox_id: 'sb_00000000-0000-0000-0000-000000000000' }],
      ['list_files', { path: '.', root: '/' }],
      ['changes', { sandbox: 'sb_00000000-0000-0000-0000-000000000000' }],
    ] as const) {
      const r = await call(server.client, tool, args);
      expect(errorCode(r), tool).toBe('AF_INVALID_ARGUMENT');
      expectNoLeak(r.text);
    }
    const unknownTool = await call(server.client, 'read_host_file', { path: '/etc/passwd' });
    expect(errorCode(unknownTool)).toBe('AF_NOT_FOUND');
  });

  it('oversized and malformed inputs get clear errors, and the sandbox keeps working', async () => {
    const longName = await call(server.client, 'read_file', { path: `src/${'a'.repeat(5000)}` });
    expect(longName.isError).toBe(true);
    expectNoLeak(longName.text);
    const deep = await call(server.client, 'list_files', { path: '.', max_depth: 1_000_000 });
    expect(errorCode(deep)).toBe('AF_INVALID_ARGUMENT');
    const wrongType = await call(server.client, 'write_file', { path: 'output/x', content: 42 });
    expect(errorCode(wrongType)).toBe('AF_INVALID_ARGUMENT');
    const timeout = await call(server.client, 'run', { command: 'true', timeout_seconds: 10 ** 9 });
    expect(errorCode(timeout)).toBe('AF_INVALID_ARGUMENT');
    // After all that, the sandbox answers as before.
    const ok = await call(server.client, 'read_file', { path: 'README.md' });
    expect(ok.isError).not.toBe(true);
  });
});
