// The agent's everyday write-path work (tar, find, grep, cp, mv, rm, git clone and status, npm ci, tsc,
// make) timed natively, through fuse-overlayfs and through an AgentFense sandbox, side by side in one run:
// each round opens a fresh native work directory, a fresh fuse-overlayfs mount and a fresh sandbox (in an
// order that rotates per round) and runs every workload in each; the table shows medians over the rounds,
// the ratios to native and the FUSE requests the sandbox's worker answered per workload. Run as root with
// `pnpm bench:workloads` (builds first); see bench/workloads/README.md.
//
// Environment: BENCH_ROUNDS (default 3), BENCH_DIR (the run's temp directory: native work dir, overlay
// upper dir, the control plane's data and deltas; default /var/tmp, the disk of the cache), BENCH_CACHE
// (where the fixture is built once and kept; default /var/tmp/agentfense-bench-cache), BENCH_MAKE=1 (also
// the C build, `make -j2` of ~200 files), BENCH_ONLY=<keys> (comma-separated, e.g. `tar,find,rm`: only
// those workloads, in their usual order; name the ones they build on too).
import console from 'node:console';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import process from 'node:process';
import { ControlPlane } from '../dist/index.js';
import { Cleanup } from './workloads/cleanup.js';
import { prepareFixture } from './workloads/fixture.js';
import { run } from './workloads/host.js';
import { TARGETS, emptyResults, printReport } from './workloads/report.js';
import { openAgentfense, openNative, openOverlay } from './workloads/targets.js';
import { MAKE_WORKLOAD, WORKLOADS, plainScript, timedMs, timedScript } from './workloads/workloads.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BENCH_DIR = process.env.BENCH_DIR ?? '/var/tmp';
const CACHE_DIR = process.env.BENCH_CACHE ?? '/var/tmp/agentfense-bench-cache';
const ALL_WORKLOADS = [...WORKLOADS, MAKE_WORKLOAD];
const ONLY = process.env.BENCH_ONLY?.split(',').filter((k) => k !== '');
for (const key of ONLY ?? []) {
  if (!ALL_WORKLOADS.some((w) => w.key === key)) {
    throw new Error(`BENCH_ONLY: no workload ${key} (${ALL_WORKLOADS.map((w) => w.key).join(', ')})`);
  }
}
/** The workloads of this run, in their order (BENCH_ONLY keeps a few: a workload's prerequisites too). */
const WORKLOAD_LIST =
  ONLY !== undefined
    ? ALL_WORKLOADS.filter((w) => ONLY.includes(w.key))
    : process.env.BENCH_MAKE === '1'
      ? ALL_WORKLOADS
      : WORKLOADS;

/** Why a command failed, in one line: its status and the end of its stderr. */
function failure(result) {
  const how = result.timedOut ? 'timed out' : `exit ${result.exitCode ?? result.signal}`;
  const stderr = result.stderr.trim().split('\n').slice(-3).join(' | ').slice(-400);
  return `${how}${stderr === '' ? '' : `: ${stderr}`}`;
}

/** Request counts between two `ops()` readings. */
function opsDelta(before, after) {
  const out = {};
  for (const [op, n] of Object.entries(after)) if (n > (before[op] ?? 0)) out[op] = n - (before[op] ?? 0);
  return out;
}

/** Every workload once in `session`; a failing one is recorded and printed, and the round goes on. */
async function runWorkloads({ session, target, round, results }) {
  const line = [];
  for (const w of WORKLOAD_LIST) {
    const r = results.get(w.name)[target];
    const fail = (what, result) => {
      const message = `${what}${failure(result)}`;
      r.errors.push(`round ${round + 1}: ${message}`);
      console.error(`  FAILED ${w.name} on ${target}, round ${round + 1}: ${message}`);
    };
    // Writes of the previous workload (or target) out to disk first, untimed, so none pays for another.
    await run(['sync']);
    if (w.prep !== undefined) {
      const prep = await session.sh(plainScript(w.prep));
      if (prep.exitCode !== 0) {
        fail('set-up: ', prep);
        continue;
      }
    }
    const before = await session.ops?.();
    const cpuBefore = await session.cpuMs?.();
    const timed = await session.sh(timedScript(w.run));
    const cpuAfter = await session.cpuMs?.();
    const after = await session.ops?.();
    if (timed.exitCode !== 0) {
      fail('', timed);
      continue;
    }
    const ms = timedMs(timed.stdout);
    r.ms.push(ms);
    if (before !== undefined) r.ops.push(opsDelta(before, after));
    if (cpuBefore !== undefined && cpuAfter !== undefined) r.cpuMs.push(cpuAfter - cpuBefore);
    const p50 = await session.p50Us?.();
    if (p50 !== undefined) r.p50Us.push(p50);
    line.push(`${w.key} ${Math.round(ms)}`);
    if (w.after !== undefined) {
      const tidied = await session.sh(plainScript(w.after));
      if (tidied.exitCode !== 0) fail('clean-up: ', tidied);
    }
  }
  return line.join(', ');
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error('run as root (fuse-overlayfs mounts, bwrap sandboxes)');
  const cleanup = new Cleanup();
  cleanup.exitOnSignals();
  try {
    const { codebase, counts } = await prepareFixture({ cacheDir: CACHE_DIR, log: console.log });
    const load = (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
    const overlay = (await run(['fuse-overlayfs', '--version']))
      .split('\n')
      .find((l) => l.startsWith('fuse-overlayfs'));
    console.log(
      `kernel ${(await run(['uname', '-r'])).trim()}, node ${process.version}, ${overlay}, load ${load}\n` +
        `codebase ${codebase}: the ${counts.python} standard library as a tarball ${counts.stdlibFiles} files ` +
        `in ${counts.stdlibDirs} directories (${(counts.stdlibBytes / 1048576).toFixed(0)} MiB), the same ` +
        `as a checkout, a repository of ${counts.repoFiles} files, npm lockfile of ${counts.npmPackages} ` +
        `packages, ${counts.tsFiles} TS files, ${counts.cFiles} C files\n` +
        `${ROUNDS} rounds, medians; targets in an order that rotates per round\n`,
    );
    const base = await mkdtemp(join(BENCH_DIR, 'af-bench-workloads-'));
    cleanup.add(`remove ${base}`, () => rm(base, { recursive: true, force: true }));
    const cp = await ControlPlane.open({ dataDir: join(base, 'data'), reapIntervalMs: 0 });
    cleanup.add('close the control plane', () => cp.close());
    const { id: codebaseId } = await cp.linkCodebase({ path: codebase });
    const open = {
      native: (round) => openNative({ codebase, dir: join(base, `native-${round}`), cleanup }),
      overlay: (round) => openOverlay({ codebase, dir: join(base, `overlay-${round}`), cleanup }),
      agentfense: () => openAgentfense({ cp, codebaseId, cleanup }),
    };
    const results = emptyResults(WORKLOAD_LIST);
    const started = Date.now();
    for (let round = 0; round < ROUNDS; round += 1) {
      const order = TARGETS.map((_, i) => TARGETS[(i + round) % TARGETS.length]);
      for (const target of order) {
        const began = Date.now();
        const session = await open[target](round);
        try {
          const line = await runWorkloads({ session, target, round, results });
          console.log(
            `round ${round + 1} ${target} (${((Date.now() - began) / 1000).toFixed(0)} s): ${line}`,
          );
        } finally {
          await session.close();
        }
      }
    }
    console.log(`\n${ROUNDS} rounds in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
    if (printReport({ workloads: WORKLOAD_LIST, results }) > 0) process.exitCode = 1;
  } finally {
    await cleanup.runAll();
  }
}

try {
  await main();
} catch (err) {
  console.error('bench failed:', err);
  process.exitCode = 1;
}
