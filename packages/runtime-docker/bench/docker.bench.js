// Docker runtime latency beside bwrap's: create → first exec (start a sandbox, run `true`, the result back)
// and exec latency of `true` in a running sandbox (p50/p99), each with and without memory+pids limits.
// Run after `pnpm exec tsc -b` (root script: `pnpm bench:docker`). Needs root. Uses the engine at
// DOCKER_HOST (or docker's default socket) if one answers, else starts Debian's dockerd privately like the
// tests do (state under AF_DOCKERD_STATE_DIR, default /var/lib/agentfense/test-dockerd) and stops it after.
import { randomUUID } from 'node:crypto';
import console from 'node:console';
import { chown, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { execa } from 'execa';
import { createBwrapRuntime } from '../../runtime-bwrap/dist/index.js';
import { createDockerRuntime, ensureBaseImage, probeEngine, startDockerd } from '../dist/index.js';

const CREATES = 5;
const WARMUP = 5;
const EXECS = 30;
const LIMITS = { memoryBytes: 256 * 1024 * 1024, pidsLimit: 100 };
const logger = { debug: () => undefined, warn: (obj, msg) => console.warn(msg, obj) };

const percentile = (xs, p) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const ms = (x) => `${x.toFixed(x < 100 ? 1 : 0)} ms`;

/** A workspace directory inside a shared mount (docker's rslave bind needs one), writable by uid 1000. */
async function sharedParent() {
  const dir = await mkdtemp(join(tmpdir(), 'af-bench-docker-'));
  await execa('mount', ['--bind', dir, dir]);
  await execa('mount', ['--make-shared', dir]);
  let n = 0;
  return {
    async fixture() {
      const root = join(dir, `sb${n++}`);
      const workspaceHostPath = join(root, 'ws');
      const stateDir = join(root, 'state');
      await mkdir(workspaceHostPath, { recursive: true });
      await mkdir(stateDir, { recursive: true });
      await chown(workspaceHostPath, 1000, 1000);
      return { workspaceHostPath, stateDir };
    },
    async cleanup() {
      await execa('umount', ['--lazy', dir]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** create → first exec, CREATES times (each sandbox stopped afterwards; stop is not timed). */
async function measureCreate(runtime, parent, resources) {
  const out = [];
  for (let i = 0; i < CREATES; i++) {
    const fx = await parent.fixture();
    const t = performance.now();
    const sb = await runtime.start({
      sandboxId: `sb_${randomUUID()}`,
      ...fx,
      ...(resources ? { resources } : {}),
    });
    await sb.exec({ command: ['true'] });
    out.push(performance.now() - t);
    await sb.stop();
  }
  return out;
}

/** exec latency of `true` in one running sandbox. */
async function measureExec(runtime, parent, resources) {
  const fx = await parent.fixture();
  const sb = await runtime.start({
    sandboxId: `sb_${randomUUID()}`,
    ...fx,
    ...(resources ? { resources } : {}),
  });
  try {
    for (let i = 0; i < WARMUP; i++) await sb.exec({ command: ['true'] });
    const out = [];
    for (let i = 0; i < EXECS; i++) {
      const t = performance.now();
      await sb.exec({ command: ['true'] });
      out.push(performance.now() - t);
    }
    return out;
  } finally {
    await sb.stop();
  }
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error('the docker benchmark needs root (dockerd, mounts)');
  let started;
  let dockerHost = (await probeEngine()).ok ? undefined : null;
  if (dockerHost === null) {
    started = await startDockerd({
      stateDir: process.env.AF_DOCKERD_STATE_DIR ?? '/var/lib/agentfense/test-dockerd',
    });
    dockerHost = started.dockerHost;
  }
  const parent = await sharedParent();
  try {
    await ensureBaseImage({ ...(dockerHost ? { dockerHost } : {}), progress: (line) => console.log(line) });
    const docker = createDockerRuntime({ ...(dockerHost ? { dockerHost } : {}), logger });
    const bwrap = createBwrapRuntime({ logger });
    await docker.check();
    await bwrap.check();
    const rows = [];
    for (const [name, runtime] of [
      ['bwrap', bwrap],
      ['docker', docker],
    ]) {
      for (const [label, resources] of [
        ['no limits', undefined],
        ['memory+pids limits', LIMITS],
      ]) {
        const create = await measureCreate(runtime, parent, resources);
        const exec = await measureExec(runtime, parent, resources);
        rows.push({ name, label, create, exec });
      }
    }
    const load = (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
    console.log(
      `\nruntime latency (load ${load}; create: ${CREATES} runs, exec \`true\`: ${EXECS} runs after ${WARMUP} warm-ups)`,
    );
    console.log('| runtime | limits | create → first exec p50 | exec p50 | exec p99 |');
    console.log('|---|---|---|---|---|');
    for (const { name, label, create, exec } of rows) {
      console.log(
        `| ${name} | ${label} | ${ms(percentile(create, 0.5))} | ${ms(percentile(exec, 0.5))} | ${ms(percentile(exec, 0.99))} |`,
      );
    }
  } finally {
    await parent.cleanup();
    await started?.stop();
  }
}

await main();
