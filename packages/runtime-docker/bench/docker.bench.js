// Docker runtime latency beside bwrap's, and the docker runtime through the control plane:
//   1. create → first exec (start a sandbox, run `true`, the result back), each runtime with and without
//      memory+pids limits; docker also with its container pool on ("pooled, paced": before each round the
//      bench waits, untimed, until the pool has refilled, as when sandboxes come at an agent's pace);
//   2. exec latency of `true` in a running sandbox (p50/p99);
//   3. where an exec's time goes: the engine's own exec of a bare `true` (create → start/stream → inspect,
//      no wrapper), the same with the session wrapper, and the runtime's whole exec (through af-init, the
//      container's pid 1; the row "engine execs (launcher: false)" is the runtime without it);
//   4. 20 docker sandboxes at once on one codebase through the control plane (FUSE worker, relay,
//      pool), each running a command: all must succeed.
// Run after `pnpm exec tsc -b` (root script: `pnpm bench:docker`). Needs root. Uses the engine at
// DOCKER_HOST (or docker's default socket) if one answers, else starts Debian's dockerd privately like the
// tests do (state under AF_DOCKERD_STATE_DIR, default /var/lib/agentfense/test-dockerd) and stops it after.
import { randomUUID } from 'node:crypto';
import console from 'node:console';
import { chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { execa } from 'execa';
import { PassThrough } from 'node:stream';
import { createBwrapRuntime } from '../../runtime-bwrap/dist/index.js';
import { ControlPlane } from '../../control/dist/index.js';
import {
  createDockerRuntime,
  ensureBaseImage,
  probeEngine,
  startDockerd,
  WRAPPER_SCRIPT,
  SANDBOX_USER,
} from '../dist/index.js';
// Internal pieces, for the exec profile only.
import { createEngineApi } from '../dist/engine/api.js';
import { demultiplex } from '../dist/engine/demux.js';

const CREATES = 5;
const WARMUP = 5;
const EXECS = 30;
const PROFILE_EXECS = 30;
const CONCURRENT = 20;
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

/**
 * create → first exec, CREATES times (each sandbox stopped afterwards; stop is not timed). With a pool,
 * one untimed round first makes the pool fill for this kind of sandbox, and each round waits (untimed)
 * until it has refilled.
 */
async function measureCreate(runtime, parent, resources) {
  const out = [];
  const pooled = runtime.pool !== undefined && runtime.pool.size > 0;
  for (let i = pooled ? -1 : 0; i < CREATES; i++) {
    if (pooled) await runtime.pool.settled();
    const fx = await parent.fixture();
    const t = performance.now();
    const sb = await runtime.start({
      sandboxId: `sb_${randomUUID()}`,
      ...fx,
      ...(resources ? { resources } : {}),
    });
    await sb.exec({ command: ['true'] });
    if (i >= 0) out.push(performance.now() - t);
    await sb.stop();
  }
  return out;
}

/** One engine exec of `cmd` in container `id`: its three API calls timed separately. */
async function engineExec(api, id, cmd) {
  const t0 = performance.now();
  const { Id } = await api.request('POST', `/containers/${id}/exec`, {
    body: { AttachStdout: true, AttachStderr: true, Cmd: cmd, User: SANDBOX_USER },
  });
  const t1 = performance.now();
  const socket = await api.upgrade(`/exec/${Id}/start`, { Detach: false, Tty: false });
  await demultiplex(socket, new PassThrough().resume(), new PassThrough().resume());
  const t2 = performance.now();
  let info;
  do info = await api.request('GET', `/exec/${Id}/json`);
  while (info.Running);
  const t3 = performance.now();
  return { create: t1 - t0, start: t2 - t1, inspect: t3 - t2, total: t3 - t0 };
}

/** Where an exec's time goes: the engine's exec of a bare `true`, with the wrapper, and the runtime's. */
async function profileExec(runtime, parent, dockerHost) {
  const fx = await parent.fixture();
  const sandboxId = `sb_${randomUUID()}`;
  const sb = await runtime.start({ sandboxId, ...fx });
  const api = createEngineApi(dockerHost ?? undefined);
  try {
    const { stdout } = await execa(
      'docker',
      ['ps', '-q', '--no-trunc', '--filter', `name=^/agentfense-${sandboxId}$`],
      {
        env: dockerHost ? { DOCKER_HOST: dockerHost } : {},
      },
    );
    const id = stdout.trim();
    for (let i = 0; i < WARMUP; i++) await sb.exec({ command: ['true'] });
    const bare = [];
    const wrapped = [];
    const whole = [];
    // Interleaved, so load changes hit all three alike.
    for (let i = 0; i < PROFILE_EXECS; i++) {
      bare.push(await engineExec(api, id, ['true']));
      wrapped.push(
        await engineExec(api, id, ['/bin/sh', '-c', WRAPPER_SCRIPT, 'agentfense-wrapper', 'true']),
      );
      const t = performance.now();
      await sb.exec({ command: ['true'] });
      whole.push(performance.now() - t);
    }
    return { bare, wrapped, whole };
  } finally {
    await sb.stop();
    await api.close();
  }
}

/** CONCURRENT docker sandboxes at once on one codebase through the control plane, each running a command. */
async function concurrentThroughControlPlane(root, dockerHost) {
  if (dockerHost) process.env.DOCKER_HOST = dockerHost;
  const repo = join(root, 'repo');
  for (let d = 0; d < 20; d++) {
    await mkdir(join(repo, 'src', `m${d}`), { recursive: true });
    for (let f = 0; f < 10; f++)
      await writeFile(join(repo, 'src', `m${d}`, `f${f}.ts`), `export const v = ${f};\n`);
  }
  await writeFile(join(repo, '.env'), 'API_KEY=not-for-agents\n');
  const cp = await ControlPlane.open({ dataDir: join(root, 'data'), reapIntervalMs: 0, logLevel: 'warn' });
  try {
    const { id: codebaseId } = await cp.linkCodebase({ path: repo });
    const policy = { codebaseId, preset: 'agent-safe', runtime: 'docker' };
    // One sandbox first: loads the code paths, and the container pool starts filling.
    const warm = await cp.createSandbox(policy);
    await cp.startSandbox(warm.id);
    await cp.exec(warm.id, 'true');
    await cp.destroySandbox(warm.id);
    const began = performance.now();
    const settled = await Promise.allSettled(
      Array.from({ length: CONCURRENT }, async () => {
        const sb = await cp.createSandbox(policy);
        await cp.startSandbox(sb.id);
        return sb.id;
      }),
    );
    const startedIn = performance.now() - began;
    const ids = settled.filter((r) => r.status === 'fulfilled').map((r) => r.value);
    const results = await Promise.all(
      ids.map((id, i) =>
        cp
          .exec(
            id,
            `cat /workspace/src/m${i % 20}/f1.ts >/dev/null && ! cat /workspace/.env 2>/dev/null && find /workspace/src -type f | wc -l`,
          )
          .catch((err) => ({ exitCode: -1, stderr: String(err) })),
      ),
    );
    const ok = results.filter((r) => r.exitCode === 0 && String(r.stdout).trim() === '200').length;
    await Promise.all(ids.map((id) => cp.destroySandbox(id)));
    await cp.deleteCodebase(codebaseId);
    for (const r of settled.filter((x) => x.status === 'rejected')) console.error(r.reason);
    for (const r of results.filter((x) => x.exitCode !== 0)) console.error(String(r.stderr));
    return { ok, startedIn };
  } finally {
    await cp.close();
  }
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
    // The pool's refill (a container creation) would run during the measurement otherwise.
    await runtime.pool?.settled();
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
    const pooled = createDockerRuntime({ ...(dockerHost ? { dockerHost } : {}), logger, poolSize: 2 });
    // Without af-init: every command an engine exec under the session wrapper.
    const engineOnly = createDockerRuntime({
      ...(dockerHost ? { dockerHost } : {}),
      logger,
      launcher: false,
    });
    const bwrap = createBwrapRuntime({ logger });
    await docker.check();
    await pooled.check();
    await bwrap.check();
    const rows = [];
    for (const [name, runtime] of [
      ['bwrap', bwrap],
      ['docker, engine execs (launcher: false)', engineOnly],
      ['docker', docker],
      ['docker, pooled (paced)', pooled],
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
    await pooled.close();
    const profile = await profileExec(docker, parent, dockerHost);
    const scratch = await mkdtemp(join(tmpdir(), 'af-bench-docker-cp-'));
    let concurrent;
    try {
      concurrent = await concurrentThroughControlPlane(scratch, dockerHost);
    } finally {
      await rm(scratch, { recursive: true, force: true });
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
    const p50 = (xs, key) => ms(percentile(key ? xs.map((x) => x[key]) : xs, 0.5));
    console.log(`\nexec profile (p50 of ${PROFILE_EXECS}, interleaved):`);
    console.log(
      `  engine exec of a bare \`true\`: ${p50(profile.bare, 'total')} ` +
        `(exec create ${p50(profile.bare, 'create')}, start → stream end ${p50(profile.bare, 'start')}, inspect ${p50(profile.bare, 'inspect')})`,
    );
    console.log(
      `  engine exec of \`true\` under the session wrapper: ${p50(profile.wrapped, 'total')} ` +
        `(start → stream end ${p50(profile.wrapped, 'start')})`,
    );
    console.log(`  the runtime's exec(['true']) (through af-init): ${p50(profile.whole)}`);
    console.log(
      `\n${CONCURRENT} docker sandboxes at once on one codebase (control plane, agent-safe): ` +
        `${concurrent.ok}/${CONCURRENT} commands succeeded; all started in ${ms(concurrent.startedIn)}`,
    );
    if (concurrent.ok !== CONCURRENT) process.exitCode = 1;
  } finally {
    await parent.cleanup();
    await started?.stop();
  }
}

await main();
