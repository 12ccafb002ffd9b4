// Control-plane benchmark (issue 4 targets), on real bwrap and real worker mounts over a linked codebase
// (examples/demo-repo): create → start → first exec result, exec latency in a running sandbox, and 20
// sandboxes running at once on one codebase (all must succeed; memory printed). Run as root with
// `node packages/control/bench/sandbox.bench.js` after `pnpm build`. Exits 1 when something fails;
// figures over their target are marked but do not fail the run (the host's load decides them).
import console from 'node:console';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { ControlPlane } from '../dist/index.js';

const REPO = fileURLToPath(new URL('../../../examples/demo-repo', import.meta.url));
const START_TARGET_P50_MS = 150;
const EXEC_TARGET_P50_MS = 15;
const START_ROUNDS = 20;
const EXEC_ROUNDS = 200;
const CONCURRENT = 20;

/** The value at fraction `q` of sorted `values`. */
function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function report(label, times, target) {
  const p50 = quantile(times, 0.5);
  const verdict = p50 < target ? 'ok' : 'OVER TARGET';
  console.log(
    `${label}: p50 ${p50.toFixed(1)} ms, p99 ${quantile(times, 0.99).toFixed(1)} ms ` +
      `(${times.length} runs; target p50 < ${target} ms: ${verdict})`,
  );
}

function must(result, what) {
  if (result.exitCode !== 0)
    throw new Error(`${what} exited ${result.exitCode}: ${result.stderr.toString()}`);
}

const root = await mkdtemp(join(tmpdir(), 'af-bench-control-'));
const cp = await ControlPlane.open({ dataDir: join(root, 'data'), reapIntervalMs: 0 });
try {
  const { id: codebaseId } = await cp.linkCodebase({ path: REPO });

  // 1. create → start → first exec result (two warm-up rounds load the code paths and the page cache).
  const startTimes = [];
  for (let i = 0; i < START_ROUNDS + 2; i += 1) {
    const started = performance.now();
    const { id } = await cp.createSandbox({ codebaseId });
    await cp.startSandbox(id);
    must(await cp.exec(id, 'true'), 'first exec');
    if (i >= 2) startTimes.push(performance.now() - started);
    await cp.destroySandbox(id);
  }
  report('create → start → first exec result', startTimes, START_TARGET_P50_MS);

  // 2. exec latency in a running sandbox.
  const { id } = await cp.createSandbox({ codebaseId });
  await cp.startSandbox(id);
  for (let i = 0; i < 10; i += 1) must(await cp.exec(id, 'true'), 'warm-up exec');
  const execTimes = [];
  for (let i = 0; i < EXEC_ROUNDS; i += 1) {
    const started = performance.now();
    must(await cp.exec(id, 'true'), 'exec');
    execTimes.push(performance.now() - started);
  }
  report('exec `true` in a running sandbox', execTimes, EXEC_TARGET_P50_MS);
  await cp.destroySandbox(id);

  // 3. Many sandboxes at once on one codebase.
  const began = performance.now();
  const ids = [];
  for (let i = 0; i < CONCURRENT; i += 1) {
    const sb = await cp.createSandbox({ codebaseId });
    await cp.startSandbox(sb.id);
    ids.push(sb.id);
  }
  const results = await Promise.all(
    ids.map((sb, i) => cp.exec(sb, `cat /workspace/README.md >/dev/null && echo ${i} > /workspace/output/n`)),
  );
  const ok = results.filter((r) => r.exitCode === 0).length;
  let workersPss = 0;
  for (const sb of ids) {
    // Proportional set size: the node binary's text, shared by every worker, is counted once in total.
    const { pssBytes, rssBytes } = await cp.workerStats(sb);
    workersPss += pssBytes ?? rssBytes;
  }
  const mib = (bytes) => (bytes / 1024 / 1024).toFixed(0);
  console.log(
    `${CONCURRENT} sandboxes at once on one codebase: ${ok}/${CONCURRENT} execs succeeded; started in ` +
      `${((performance.now() - began) / 1000).toFixed(1)} s; workers ${mib(workersPss)} MiB PSS in total, ` +
      `control plane ${mib(process.memoryUsage.rss())} MiB RSS`,
  );
  for (const sb of ids) await cp.destroySandbox(sb);
  if (ok !== CONCURRENT) process.exitCode = 1;
  await cp.deleteCodebase(codebaseId);
} finally {
  await cp.close();
  await rm(root, { recursive: true, force: true });
}
