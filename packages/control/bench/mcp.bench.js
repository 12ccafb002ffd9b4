// MCP overhead benchmark: `run` of `true` through `agentfense mcp` (the SDK's own client over stdio,
// a real bwrap sandbox) against the library's exec of `true`, both measured in this process after a
// warm-up; prints both p50s and their ratio against the 2x target. Run with `pnpm bench:mcp` (builds first).
// Exits 1 if the ratio misses the target.
import console from 'node:console';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Sandbox } from '../dist/index.js';

const TARGET_RATIO = 2;
const WARMUP = 5;
const ROUNDS = 40;
const bin = fileURLToPath(new URL('../bin/agentfense.js', import.meta.url));

function p50(times) {
  const sorted = [...times].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function time(fn) {
  for (let i = 0; i < WARMUP; i += 1) await fn();
  const times = [];
  for (let i = 0; i < ROUNDS; i += 1) {
    const started = performance.now();
    await fn();
    times.push(performance.now() - started);
  }
  return p50(times);
}

const scratch = await mkdtemp(join(tmpdir(), 'af-bench-mcp-'));
try {
  const repo = join(scratch, 'repo');
  const { mkdir } = await import('node:fs/promises');
  await mkdir(repo);
  await writeFile(join(repo, 'README.md'), '# bench\n');

  const sb = await Sandbox.fromLocal(repo, { dataDir: join(scratch, 'lib-data') });
  let library;
  try {
    library = await time(async () => {
      const r = await sb.run('true', { encoding: 'buffer' });
      if (r.exitCode !== 0) throw new Error(`true exited ${r.exitCode}`);
    });
  } finally {
    await sb.destroy();
  }

  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bin, 'mcp', repo, '--data', join(scratch, 'mcp-data')],
    stderr: 'ignore',
  });
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(transport);
  let mcp;
  try {
    mcp = await time(async () => {
      const r = await client.callTool({ name: 'run', arguments: { command: 'true' } });
      if (r.isError === true || r.structuredContent?.exit_code !== 0) throw new Error('run of true failed');
    });
  } finally {
    await client.close();
  }

  const ratio = mcp / library;
  console.log(`library exec('true')  p50 ${library.toFixed(1)} ms`);
  console.log(`MCP run 'true' (stdio) p50 ${mcp.toFixed(1)} ms`);
  console.log(
    `ratio ${ratio.toFixed(2)}x (target <= ${TARGET_RATIO}x) ${ratio <= TARGET_RATIO ? 'OK' : 'MISSED'}`,
  );
  if (ratio > TARGET_RATIO) process.exitCode = 1;
} finally {
  await new Promise((done) => setTimeout(done, 500));
  await rm(scratch, { recursive: true, force: true });
}
