// Control-plane benchmark (targets in bench/README.md), on real bwrap and real worker mounts, in one process with one
// ControlPlane over a temporary data directory:
//   1. create → start → first exec result, for a linked codebase (a generated tree, agent-safe preset),
//      with a breakdown of where start time goes (from the control plane's own 'sandbox started' log);
//   2. exec `true` latency in a running sandbox;
//   3. 20 sandboxes running at once on one codebase, each running a command (all must succeed), with the
//      total proportional set size of their workers and the control plane;
//   4. the library's front door: `Sandbox.fromLocal(dir)` → first exec, paced, for bwrap and docker
//      (from-local.js);
//   plus a baseline measured in this same process (bare `bwrap … true`, bare `node -e 0`), so the figures
//   can be read as ratios on a noisy host. BENCH_FROM_LOCAL_ONLY=1 runs the baseline and 4 only.
// Run as root: `pnpm bench:sandbox` (builds first). Exits 1 when something fails; figures over their
// target are marked but do not fail the run (the host's load decides them). The temporary directory is
// removed and every sandbox stopped on success, failure and SIGINT/SIGTERM.
import { spawn } from 'node:child_process';
import console from 'node:console';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { ControlPlane } from '../dist/index.js';
import { FROM_LOCAL_ROUNDS, PACE_MS, dockerEngine, fromLocalRounds } from './from-local.js';

const START_TARGET_P50_MS = 150;
const EXEC_TARGET_P50_MS = 15;
const START_ROUNDS = 20;
const EXEC_ROUNDS = 200;
const CONCURRENT = 20;
const BASELINE_ROUNDS = 20;
/** fromLocal → first exec p50, as a multiple of the bare bwrap (bwrap) and of bwrap's fromLocal (docker). */
const FROM_LOCAL_TARGET_X_BWRAP = 3;
const FROM_LOCAL_DOCKER_TARGET_X = 2;
const FROM_LOCAL_ONLY = process.env.BENCH_FROM_LOCAL_ONLY === '1';

/** The value at fraction `q` of `values` (nearest rank). */
function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
/** Output as bytes, as the runtime hands it over (no decoding in the measured path). */
const BYTES = { encoding: 'buffer' };
const ms = (n) => `${n.toFixed(1)} ms`;
const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;

function report(label, times, target) {
  const p50 = quantile(times, 0.5);
  const verdict =
    target === undefined ? '' : `; target p50 < ${target} ms: ${p50 < target ? 'ok' : 'OVER TARGET'}`;
  console.log(`${label}: p50 ${ms(p50)}, p99 ${ms(quantile(times, 0.99))} (${times.length} runs${verdict})`);
  return p50;
}

function must(result, what) {
  if (result.exitCode !== 0)
    throw new Error(`${what} exited ${result.exitCode}: ${result.stderr.toString().trim()}`);
}

/** Wall time of spawning `argv` and waiting for it to exit 0. */
function timeSpawn(argv) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(argv[0], argv.slice(1), { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code === 0) resolve(performance.now() - started);
      else reject(new Error(`${argv.join(' ')} exited ${code}`));
    });
  });
}

/** Proportional set size of a process (bytes), from /proc/<pid>/smaps_rollup. */
async function pss(pid) {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const match = /^Pss:\s+(\d+) kB/m.exec(text);
  if (match === null) throw new Error(`no Pss in /proc/${pid}/smaps_rollup`);
  return Number(match[1]) * 1024;
}

/** A small repository: 20 dirs × 10 source files, a README, and secrets agent-safe hides. */
async function generateTree(dir) {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'README.md'), '# bench repo\n');
  await writeFile(join(dir, '.env'), 'API_KEY=not-for-agents\n');
  await mkdir(join(dir, 'secrets'));
  await writeFile(join(dir, 'secrets', 'id_rsa'), 'PRIVATE\n');
  for (let d = 0; d < 20; d += 1) {
    await mkdir(join(dir, 'src', `m${d}`), { recursive: true });
    for (let f = 0; f < 10; f += 1) {
      await writeFile(join(dir, 'src', `m${d}`, `f${f}.ts`), `export const v${f} = ${d * 10 + f};\n`);
    }
  }
}

// The control plane's log goes to memory: its 'sandbox started' records carry the start breakdown.
const startRecords = [];
const logSink = new Writable({
  write(chunk, _encoding, done) {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.includes('"sandbox started"')) continue;
      const record = JSON.parse(line);
      if (record.ms !== undefined) startRecords.push(record.ms);
    }
    done();
  },
});
const logger = pino({ level: 'info' }, logSink);

const root = await mkdtemp(join(tmpdir(), 'af-bench-sandbox-'));
let cp;
let engine;
let cleaning;
const cleanup = () => {
  cleaning ??= (async () => {
    await cp?.close().catch((err) => console.error('closing the control plane failed:', err));
    await engine?.stop?.();
    await rm(root, { recursive: true, force: true });
  })();
  return cleaning;
};
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping sandboxes and removing ${root}`);
    void cleanup().finally(() => process.exit(130));
  });
}

/** A bare bwrap running `true`: the yardstick of every figure. */
const bwrapArgv = [
  'bwrap',
  '--unshare-all',
  '--die-with-parent',
  '--ro-bind',
  '/usr',
  '/usr',
  '--symlink',
  'usr/bin',
  '/bin',
  '--symlink',
  'usr/lib',
  '/lib',
  '--symlink',
  'usr/lib64',
  '/lib64',
  '--proc',
  '/proc',
  '--dev',
  '/dev',
  '--',
  'true',
];

try {
  // 0. Baseline, in this process and on this host's current load.
  for (let i = 0; i < 3; i += 1) await timeSpawn(bwrapArgv);
  const bwrapTimes = [];
  for (let i = 0; i < BASELINE_ROUNDS; i += 1) bwrapTimes.push(await timeSpawn(bwrapArgv));
  const nodeTimes = [];
  for (let i = 0; i < BASELINE_ROUNDS / 2; i += 1)
    nodeTimes.push(await timeSpawn([process.execPath, '-e', '0']));
  console.log(
    `exec path: ${process.env.AGENTFENSE_BWRAP_LAUNCHER === '0' ? 'a bwrap per command (AGENTFENSE_BWRAP_LAUNCHER=0)' : 'per-sandbox launcher (af-init; AGENTFENSE_BWRAP_LAUNCHER=0 for a bwrap per command)'}`,
  );
  const bwrapBase = report('baseline: bare `bwrap --unshare-all … true`', bwrapTimes);
  const nodeBase = report('baseline: bare `node -e 0`', nodeTimes);

  const repo = join(root, 'repo');
  await generateTree(repo);
  if (!FROM_LOCAL_ONLY) await controlPlaneRounds({ repo, bwrapBase, nodeBase });

  // 4. The library's front door, each runtime (the bare bwrap above is the yardstick of both).
  const fromLocal = {};
  for (const runtime of ['bwrap', 'docker']) {
    if (runtime === 'docker') {
      engine = await dockerEngine();
      if (engine.unavailable !== undefined) {
        console.log(`fromLocal → first exec (docker): skipped, no engine: ${engine.unavailable}`);
        continue;
      }
    }
    const { first, times, steps, ahead } = await fromLocalRounds({
      repo,
      dataDir: join(root, `lib-${runtime}`),
      runtime,
    });
    const p50 = quantile(times, 0.5);
    fromLocal[runtime] = p50;
    const against =
      runtime === 'bwrap'
        ? `; target p50 ≤ ${FROM_LOCAL_TARGET_X_BWRAP}× the bare bwrap: ${p50 <= FROM_LOCAL_TARGET_X_BWRAP * bwrapBase ? 'ok' : 'OVER TARGET'}`
        : fromLocal.bwrap === undefined
          ? ''
          : `, ${(p50 / fromLocal.bwrap).toFixed(2)}× bwrap's fromLocal; target p50 ≤ ${FROM_LOCAL_DOCKER_TARGET_X}×: ${p50 <= FROM_LOCAL_DOCKER_TARGET_X * fromLocal.bwrap ? 'ok' : 'OVER TARGET'}`;
    console.log(
      `fromLocal → first exec (${runtime}, paced ${PACE_MS / 1000} s): p50 ${ms(p50)}, p90 ${ms(quantile(times, 0.9))} ` +
        `(${FROM_LOCAL_ROUNDS} rounds after a first call of ${ms(first)}) = ${(p50 / bwrapBase).toFixed(1)}× a bare bwrap${against}`,
    );
    const p50Of = (key) =>
      ms(
        quantile(
          steps.map((x) => x[key]),
          0.5,
        ),
      );
    console.log(
      `  steps (p50): fromLocal ${p50Of('fromLocal')}, first exec ${p50Of('firstExec')}; ` +
        `${ahead}/${FROM_LOCAL_ROUNDS} got a sandbox started ahead`,
    );
  }
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await cleanup();
}

/** Sections 1-3, on one ControlPlane of the bench's own. */
async function controlPlaneRounds({ repo, bwrapBase, nodeBase }) {
  cp = await ControlPlane.open({ dataDir: join(root, 'data'), reapIntervalMs: 0, logger });
  const { id: codebaseId } = await cp.linkCodebase({ path: repo });
  const policy = { codebaseId, preset: 'agent-safe' };

  // 1. create → start → first exec result (two warm-up rounds load code paths and the page cache).
  //    'paced': before each round the bench waits (untimed) until the control plane's pool holds a
  //    ready worker, as when sandboxes are created at an agent's pace. 'back-to-back': no wait, so a
  //    round pays for a worker spawn whenever creates outpace the pool's refill (node start-up).
  const breakdown = (records) => {
    const phases = {};
    for (const record of records) {
      for (const [phase, value] of Object.entries(record)) (phases[phase] ??= []).push(value);
    }
    return Object.entries(phases)
      .map(([phase, values]) => `${phase} ${ms(quantile(values, 0.5))}`)
      .join(', ');
  };
  const poolReady = async () => {
    const deadline = Date.now() + 30_000;
    while ((cp.idleWorkerPids ?? [1]).length === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  const startRounds = async (paced) => {
    const times = [];
    const steps = [];
    const first = startRecords.length;
    for (let i = 0; i < START_ROUNDS + 2; i += 1) {
      if (paced && i > 0) await poolReady();
      const started = performance.now();
      const { id } = await cp.createSandbox(policy);
      const created = performance.now();
      await cp.startSandbox(id);
      const running = performance.now();
      const result = await cp.run(id, 'cat /workspace/README.md', BYTES);
      const elapsed = performance.now() - started;
      must(result, 'first exec');
      if (i >= 2) {
        times.push(elapsed);
        steps.push({
          create: created - started,
          start: running - created,
          firstExec: elapsed - (running - started),
        });
      }
      const destroying = performance.now();
      await cp.destroySandbox(id);
      if (i >= 2) steps.at(-1).destroy = performance.now() - destroying;
    }
    return { times, steps, records: startRecords.slice(first + 2) };
  };
  const paced = await startRounds(true);
  const startP50 = report('create → start → first exec result (paced)', paced.times, START_TARGET_P50_MS);
  console.log(`  steps (p50): ${breakdown(paced.steps)}`);
  console.log(`  start breakdown (p50 of the control plane's own timings): ${breakdown(paced.records)}`);
  console.log(
    `  = ${(startP50 / bwrapBase).toFixed(1)}× a bare bwrap, ${(startP50 / nodeBase).toFixed(2)}× a bare node`,
  );
  const backToBack = await startRounds(false);
  report('create → start → first exec result (back-to-back)', backToBack.times, START_TARGET_P50_MS);
  console.log(`  steps (p50): ${breakdown(backToBack.steps)}`);
  console.log(`  start breakdown: ${breakdown(backToBack.records)}`);

  // 2. exec latency in a running sandbox.
  const { id } = await cp.createSandbox(policy);
  await cp.startSandbox(id);
  // The policy holds: the secret is invisible, the README readable.
  const view = await cp.run(id, 'test ! -e /workspace/.env && cat /workspace/README.md', BYTES);
  must(view, 'policy check');
  for (let i = 0; i < 10; i += 1) must(await cp.run(id, ['true'], BYTES), 'warm-up exec');
  // A bare bwrap after every exec: the same load for both, so their ratio is meaningful.
  const execTimes = [];
  const bareTimes = [];
  for (let i = 0; i < EXEC_ROUNDS; i += 1) {
    const started = performance.now();
    const result = await cp.run(id, ['true'], BYTES);
    execTimes.push(performance.now() - started);
    must(result, 'exec');
    bareTimes.push(await timeSpawn(bwrapArgv));
  }
  const execP50 = report('exec `true` in a running sandbox', execTimes, EXEC_TARGET_P50_MS);
  const bareP50 = report('  bare `bwrap … true`, interleaved with those execs', bareTimes);
  console.log(`  = ${(execP50 / bareP50).toFixed(2)}× a bare bwrap`);
  await cp.destroySandbox(id);

  // 3. Many sandboxes at once on one codebase: started together, each running a command.
  const began = performance.now();
  const ids = await Promise.all(
    Array.from({ length: CONCURRENT }, async () => {
      const sb = await cp.createSandbox(policy);
      await cp.startSandbox(sb.id);
      return sb.id;
    }),
  );
  const startedIn = performance.now() - began;
  const results = await Promise.all(
    ids.map((sb, i) =>
      cp.run(sb, `cat /workspace/src/m${i % 20}/f1.ts >/dev/null && ls -R /workspace/src | wc -l`, BYTES),
    ),
  );
  const ok = results.filter((r) => r.exitCode === 0).length;
  const workerPids = ids.map((sb) => cp.workerPid(sb));
  let workersPss = 0;
  for (const pid of workerPids) workersPss += await pss(pid);
  // Idle workers spawned ahead of time (the pool) cost memory too.
  let poolPss = 0;
  for (const pid of cp.idleWorkerPids ?? []) poolPss += await pss(pid).catch(() => 0);
  const controlPss = await pss(process.pid);
  console.log(
    `${CONCURRENT} sandboxes at once on one codebase: ${ok}/${CONCURRENT} commands succeeded; all started ` +
      `in ${ms(startedIn)}; memory (PSS): workers ${mib(workersPss)} ` +
      `(${mib(workersPss / CONCURRENT)} each), idle pooled workers ${mib(poolPss)}, control plane ` +
      `${mib(controlPss)}; total ${mib(workersPss + poolPss + controlPss)}`,
  );
  await Promise.all(ids.map((sb) => cp.destroySandbox(sb)));
  if (ok !== CONCURRENT) {
    for (const r of results.filter((x) => x.exitCode !== 0)) console.error(r.stderr.toString());
    process.exitCode = 1;
  }
  await cp.deleteCodebase(codebaseId);
}
