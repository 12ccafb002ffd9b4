// Materialise benchmark (`pnpm bench:blobs`): a snapshot of a BENCH_BLOB_FILES-file tree (default 700, in
// 20 directories, 1-16 KiB each) made ready as a directory on a node, against `cp -a` of the same tree (the
// baseline: what a node would do with the codebase on a shared disk), in the same run. Three cache states:
//   cold: an empty node cache (every blob read from the store, verified, written, then linked);
//   warm: the cache holds the objects of the previous snapshot, which differs by one file (a new commit);
//   hit:  the snapshot is already materialised (a lease only).
// Rounds alternate cp -a / cold / warm / hit; medians and ratios to cp -a are printed with the load.
// The store and the cache are on the same local disk (tmpdir), so the store's network is not measured.
// BENCH_ROUNDS (default 5), BENCH_ONLY (runs only when it names `blobs`, or is unset). Temporary
// directories are removed on success, failure and SIGINT/SIGTERM.
import { execFile } from 'node:child_process';
import console from 'node:console';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { promisify } from 'node:util';
import { FsBlobStore, NodeBlobCache, snapshotDirectory } from '../dist/index.js';

const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
if (ONLY !== undefined && !ONLY.includes('blobs')) process.exit(0);

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const FILES = Number(process.env.BENCH_BLOB_FILES ?? 700);
const run = promisify(execFile);

const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const time = async (fn) => {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
};
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

const root = await mkdtemp(join(tmpdir(), 'af-bench-blobs-'));
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    void rm(root, { recursive: true, force: true }).finally(() => process.exit(130));
  });
}

try {
  const tree = join(root, 'tree');
  let bytes = 0;
  for (let i = 0; i < FILES; i++) {
    const dir = join(tree, `dir${i % 20}`);
    await mkdir(dir, { recursive: true });
    const size = 1024 + ((i * 7919) % 15) * 1024;
    bytes += size;
    await writeFile(join(dir, `file${i}.txt`), Buffer.alloc(size, `content of file ${i}\n`));
  }
  const store = await FsBlobStore.open(join(root, 'store'));
  let snapshotMs;
  const snapshotMsAll = [];
  let previous;
  let current;
  const ids = [];
  // One snapshot per round (and one before): each differs from the one before by one file.
  for (let r = 0; r <= ROUNDS; r++) {
    await writeFile(join(tree, 'changing.txt'), `round ${r}\n`);
    snapshotMs = await time(async () => {
      current = (await snapshotDirectory(store, tree)).snapshotId;
    });
    snapshotMsAll.push(snapshotMs);
    ids.push(current);
  }
  const results = { 'cp -a': [], cold: [], warm: [], hit: [] };
  const loads = [];
  for (let r = 1; r <= ROUNDS; r++) {
    previous = ids[r - 1];
    current = ids[r];
    const dest = join(root, `copy${r}`);
    results['cp -a'].push(await time(() => run('cp', ['-a', tree, dest])));
    const cold = await NodeBlobCache.open({ root: join(root, `cold${r}`), store, maxBytes: 1 << 30 });
    results.cold.push(await time(async () => (await cold.materialise(current)).release()));
    const warm = await NodeBlobCache.open({ root: join(root, `warm${r}`), store, maxBytes: 1 << 30 });
    (await warm.materialise(previous)).release();
    results.warm.push(await time(async () => (await warm.materialise(current)).release()));
    results.hit.push(await time(async () => (await warm.materialise(current)).release()));
    loads.push(loadavg()[0]);
    for (const d of [dest, join(root, `cold${r}`), join(root, `warm${r}`)]) await rm(d, { recursive: true });
  }
  const base = median(results['cp -a']);
  console.log(
    `materialise a ${FILES + 1}-file snapshot (${(bytes / 1048576).toFixed(1)} MiB), ${ROUNDS} rounds`,
  );
  console.log(
    `snapshot into the store (all blobs new the first time, then one): first ${snapshotMsAll[0].toFixed(1)} ms, then median ${median(snapshotMsAll.slice(1)).toFixed(1)} ms`,
  );
  for (const [name, values] of Object.entries(results)) {
    const m = median(values);
    console.log(
      `${name.padEnd(6)} median ${m.toFixed(1).padStart(7)} ms   ratio to cp -a ${(m / base).toFixed(2)}`,
    );
  }
  console.log(`load (1 min) during rounds: ${loads.map((l) => l.toFixed(1)).join(' ')}; now ${load()}`);
} finally {
  await rm(root, { recursive: true, force: true });
}
