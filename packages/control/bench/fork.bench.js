// Fork benchmark (part of `pnpm bench:checkpoints`; targets in ../../fuse-worker/bench/README.md): a fork
// of a checkpoint → its first exec result, against a fresh create → start → first exec result, in the same
// run, on real bwrap and real worker mounts, one ControlPlane over a temporary data directory. The parent
// sandbox (preset development) wrote BENCH_FORK_FILES files (default 1,000) and was checkpointed once;
// each round forks that checkpoint (one fork, then started as a fresh sandbox is) and runs
// `cat /workspace/README.md` in it. Paced:
// before each round the bench waits (untimed) until the worker pool holds a ready worker, as when an agent
// forks at its own pace. Fresh and fork rounds alternate; p50 and p90 of each, and their ratio.
// Run as root. BENCH_ROUNDS (default 20), BENCH_ONLY (runs only when it names `fork`, or is unset).
// Exits 1 when something fails; a ratio over its target is marked, not a failure. The temporary directory
// is removed and every sandbox stopped on success, failure and SIGINT/SIGTERM.
import console from 'node:console';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { pino } from 'pino';
import { ControlPlane } from '../dist/index.js';

const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
if (ONLY !== undefined && !ONLY.includes('fork')) process.exit(0);

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);
const FILES = Number(process.env.BENCH_FORK_FILES ?? 1000);
const TARGET_RATIO = 1.2;
const BYTES = { encoding: 'buffer' };

/** The value at fraction `q` of `values` (nearest rank). */
function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
const ms = (n) => `${n.toFixed(1)} ms`;

function must(result, what) {
  if (result.exitCode !== 0)
    throw new Error(`${what} exited ${result.exitCode}: ${result.stderr.toString().trim()}`);
}

const root = await mkdtemp(join(tmpdir(), 'af-bench-fork-'));
let cp;
let cleaning;
const cleanup = () => {
  cleaning ??= (async () => {
    await cp?.close().catch((err) => console.error('closing the control plane failed:', err));
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

try {
  const repo = join(root, 'repo');
  await mkdir(join(repo, 'src'), { recursive: true });
  await writeFile(join(repo, 'README.md'), '# bench repo\n');
  for (let f = 0; f < 200; f += 1) await writeFile(join(repo, 'src', `f${f}.ts`), `export const v = ${f};\n`);

  cp = await ControlPlane.open({
    dataDir: join(root, 'data'),
    reapIntervalMs: 0,
    logger: pino({ level: 'warn' }),
  });
  const { id: codebaseId } = await cp.linkCodebase({ path: repo });
  const policy = { codebaseId, preset: 'development' };
  const parent = await cp.createSandbox(policy);
  await cp.startSandbox(parent.id);
  must(
    await cp.run(
      parent.id,
      `mkdir -p /workspace/gen && cd /workspace/gen && i=0; while [ $i -lt ${FILES} ]; do echo x > f$i; i=$((i+1)); done`,
      BYTES,
    ),
    'writing the parent files',
  );
  const checkpoint = await cp.checkpoint(parent.id, { name: 'bench' });

  const poolReady = async () => {
    const deadline = Date.now() + 30_000;
    while ((cp.idleWorkerPids ?? [1]).length === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  const fresh = [];
  const forked = [];
  const forkSteps = [];
  // Two warm-up rounds of each (code paths, page cache), then ROUNDS timed.
  for (let i = 0; i < ROUNDS + 2; i += 1) {
    for (const kind of i % 2 === 0 ? ['fresh', 'fork'] : ['fork', 'fresh']) {
      await poolReady();
      const started = performance.now();
      let id;
      let made;
      let running;
      if (kind === 'fresh') {
        ({ id } = await cp.createSandbox(policy));
        await cp.startSandbox(id);
      } else {
        [{ id }] = await cp.forkSandbox(parent.id, { checkpointId: checkpoint.id, start: false });
        made = performance.now();
        await cp.startSandbox(id);
        running = performance.now();
      }
      const result = await cp.run(id, 'cat /workspace/README.md', BYTES);
      const elapsed = performance.now() - started;
      must(result, `${kind} first exec`);
      if (kind === 'fork' && i === 0) {
        // Once: the fork stands on the checkpoint (the parent's files are there).
        must(
          await cp.run(id, `test -f /workspace/gen/f${FILES - 1}`, BYTES),
          'the fork sees the parent files',
        );
      }
      if (i >= 2) {
        (kind === 'fresh' ? fresh : forked).push(elapsed);
        if (kind === 'fork') {
          forkSteps.push({
            fork: made - started,
            start: running - made,
            firstExec: elapsed - (running - started),
          });
        }
      }
      await cp.destroySandbox(id);
    }
  }
  const freshP50 = quantile(fresh, 0.5);
  const forkP50 = quantile(forked, 0.5);
  const ratio = forkP50 / freshP50;
  console.log(
    `create → start → first exec (fresh, paced): p50 ${ms(freshP50)}, p90 ${ms(quantile(fresh, 0.9))} (${fresh.length} runs)`,
  );
  console.log(
    `fork of a checkpoint (${FILES} files) → first exec (paced): p50 ${ms(forkP50)}, p90 ${ms(quantile(forked, 0.9))} ` +
      `(${forked.length} runs) = ${ratio.toFixed(2)}x fresh (target ≤ ${TARGET_RATIO}x: ${ratio <= TARGET_RATIO ? 'met' : 'MISSED'})`,
  );
  const p50Of = (key) =>
    ms(
      quantile(
        forkSteps.map((x) => x[key]),
        0.5,
      ),
    );
  console.log(
    `  steps (p50): fork (made, not started) ${p50Of('fork')}, start ${p50Of('start')}, first exec ${p50Of('firstExec')}`,
  );
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await cleanup();
}
