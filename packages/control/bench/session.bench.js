// Session round-trip benchmark: 200 `true` commands in one session against a real bwrap sandbox (a tmp
// directory as /workspace), for each shell, after a warm-up; prints p50/p99 against the 5 ms target.
// Run with `pnpm bench:session` (builds first), as root. Exits 1 if a p50 misses the target.
import console from 'node:console';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { createBwrapRuntime } from '@agentfense/runtime-bwrap';
import { SESSION_SHELLS, createSession } from '../dist/index.js';

const TARGET_P50_MS = 5;
const WARMUP = 20;
const ROUNDS = 200;
const silent = { debug: () => undefined, warn: (obj, msg) => console.warn(msg, obj) };

/** The value at fraction `q` of sorted `values`. */
function quantile(values, q) {
  return values[Math.min(values.length - 1, Math.floor(q * values.length))];
}

async function measure(sandbox, shell) {
  const session = await createSession(sandbox, { shell });
  try {
    for (let i = 0; i < WARMUP; i += 1) await session.run('true', { encoding: 'buffer' });
    const times = [];
    for (let i = 0; i < ROUNDS; i += 1) {
      const started = performance.now();
      const result = await session.run('true', { encoding: 'buffer' });
      times.push(performance.now() - started);
      if (result.exitCode !== 0) throw new Error(`true exited ${result.exitCode}`);
    }
    times.sort((a, b) => a - b);
    return { p50: quantile(times, 0.5), p99: quantile(times, 0.99) };
  } finally {
    await session.close();
  }
}

const root = await mkdtemp(join(tmpdir(), 'af-bench-session-'));
let sandbox;
let failed = false;
try {
  await mkdir(join(root, 'ws'));
  await mkdir(join(root, 'state'));
  sandbox = await createBwrapRuntime({ logger: silent }).start({
    sandboxId: `sb_${randomUUID()}`,
    workspaceHostPath: join(root, 'ws'),
    stateDir: join(root, 'state'),
  });
  for (const shell of SESSION_SHELLS) {
    const { p50, p99 } = await measure(sandbox, shell);
    const verdict = p50 < TARGET_P50_MS ? 'ok' : 'OVER TARGET';
    failed ||= p50 >= TARGET_P50_MS;
    console.log(
      `session \`true\` round trip, ${shell}: p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms ` +
        `(${ROUNDS} runs; target p50 < ${TARGET_P50_MS} ms: ${verdict})`,
    );
  }
} finally {
  await sandbox?.stop();
  await rm(root, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
