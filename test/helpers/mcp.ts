// Shared by the MCP tests: the SDK's own client over stdio against the built bin, tool-call shorthands,
// and the "nothing left behind" checks (mounts, processes, sandbox data).
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { listMounts } from '@agentfense/fuse-worker';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const bin = `${root}packages/control/bin/agentfense.js`;

export interface StdioServer {
  readonly client: Client;
  readonly transport: StdioClientTransport;
  readonly pid: number;
  /** What the server wrote on stderr so far. */
  stderr(): string;
}

/** Starts `agentfense mcp <repo> --data <data> ...flags` and connects the SDK client to it. */
export async function startStdio(repo: string, data: string, flags: string[] = []): Promise<StdioServer> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bin, 'mcp', repo, '--data', data, ...flags],
    stderr: 'pipe',
  });
  let errors = '';
  transport.stderr?.on('data', (chunk: Buffer) => (errors += chunk.toString('utf8')));
  const client = new Client({ name: 'agentfense-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport, pid: transport.pid as number, stderr: () => errors };
}

/** Calls a tool; returns the result with its first text block as `text`. */
export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<CallToolResult & { text: string; data: Record<string, unknown> }> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const first = result.content[0];
  return {
    ...result,
    text: first?.type === 'text' ? first.text : '',
    data: result.structuredContent ?? {},
  };
}

/** The error code of a tool error (undefined for a success). */
export function errorCode(result: { isError?: boolean; data: Record<string, unknown> }): string | undefined {
  if (result.isError !== true) return undefined;
  return (result.data.error as { code?: string } | undefined)?.code;
}

/** Resolves once process `pid` is gone (polling: it is not our child when the SDK spawned it). */
export async function waitGone(pid: number, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    if (Date.now() > until) throw new Error(`process ${pid} still running after ${timeoutMs} ms`);
    await new Promise((done) => setTimeout(done, 50));
  }
}

/** FUSE mounts whose source or mountpoint mentions `text` (a data dir or a sandbox id). */
export async function mountsOf(text: string): Promise<string[]> {
  return (await listMounts()).map((m) => m.mountpoint).filter((m) => m.includes(text));
}

/** Processes whose command line mentions `text`. */
export async function processesOf(text: string): Promise<string[]> {
  const r = await execa('pgrep', ['-af', text], { reject: false });
  return r.stdout.split('\n').filter((line) => line !== '' && !line.includes('pgrep'));
}

/** Sandbox directories left in a data dir. */
export async function sandboxDirs(data: string): Promise<string[]> {
  return readdir(join(data, 'sandboxes')).catch(() => []);
}
