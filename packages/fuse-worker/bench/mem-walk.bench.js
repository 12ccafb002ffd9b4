// A worker's memory per entry the kernel knows (bench/README.md, "Memory per known entry"): one worker mounted on a tree of
// WALK_DIRS x WALK_FILES files of 2 KB; private memory (Pss_Anon) idle, then 8 s and 30 s after one `find`
// over the mount (READDIRPLUS: the worker learns every entry), split into glibc's main heap and the rest
// (V8's pages, stacks, mmap'd buffers). Bytes per entry = (private after - private idle) / entries. A fresh
// worker per round; medians over the rounds. A round counts only if the kernel still held every entry at
// its last sample: a second `find` then sends the worker no LOOKUP and no listing (only GETATTRs of the
// directories, whose atime the first listing made stale). Another process's `drop_caches` makes the
// kernel FORGET the entries, and the worker's memory falls with them: such a round is reported, left out.
//
// Run as root after `pnpm build`: `node packages/fuse-worker/bench/mem-walk.bench.js`.
// Environment: BENCH_DIR (default /var/tmp; the tree is kept there between runs), WALK_DIRS (default 100),
// WALK_FILES (default 100), BENCH_ROUNDS (default 3).
import console from 'node:console';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnWorker } from '../dist/index.js';

const BASE = process.env.BENCH_DIR ?? '/var/tmp';
const DIRS = Number(process.env.WALK_DIRS ?? 100);
const FILES = Number(process.env.WALK_FILES ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ENTRIES = DIRS * FILES + DIRS + 1;
const AFTER = [8, 30];

/** The codebase, made once and kept (`done` marks a complete one). */
async function tree() {
  const lower = join(BASE, `af-mem-walk-${DIRS}x${FILES}`);
  const done = join(lower, 'done');
  if (await stat(done).catch(() => null)) return lower;
  await rm(lower, { recursive: true, force: true });
  const content = 'x'.repeat(2000);
  for (let d = 0; d < DIRS; d++) {
    const dir = join(lower, 'tree', `d${String(d).padStart(2, '0')}`);
    await mkdir(dir, { recursive: true });
    for (let f = 0; f < FILES; f++) await writeFile(join(dir, `f${String(f).padStart(2, '0')}.txt`), content);
  }
  await writeFile(done, '');
  return lower;
}

/** Private (anonymous) memory of `pid` in MiB: the total, glibc's main heap, and the rest. */
async function privateMiB(pid) {
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const total = Number(/^Pss_Anon:\s+(\d+)/m.exec(rollup)[1]) / 1024;
  let heap = 0;
  let inHeap = false;
  for (const line of (await readFile(`/proc/${pid}/smaps`, 'utf8')).split('\n')) {
    const mapping = /^[0-9a-f]+-[0-9a-f]+ /.test(line);
    if (mapping) inHeap = line.endsWith('[heap]');
    else if (inHeap && line.startsWith('Anonymous:')) heap += Number(line.split(/\s+/)[1]) / 1024;
  }
  return { total, heap, rest: total - heap };
}

async function round(lower) {
  const dir = await mkdtemp(join(BASE, 'af-mem-walk-run-'));
  const mnt = join(dir, 'mnt');
  await mkdir(mnt);
  const worker = await spawnWorker({ logFile: join(dir, 'worker.log'), name: 'mem-walk', logLevel: 'warn' });
  try {
    await worker.mount({
      lowerDir: lower,
      deltaDir: join(dir, 'delta'),
      mountpoint: mnt,
      rules: [{ pattern: '**', permission: 'read' }],
    });
    await sleep(6000); // past the start-up's own trim
    const idle = await privateMiB(worker.pid);
    const started = performance.now();
    execFileSync('find', [mnt], { stdio: 'ignore' });
    const after = [];
    for (const seconds of AFTER) {
      await sleep(Math.max(0, started + seconds * 1000 - performance.now()));
      after.push(await privateMiB(worker.pid));
    }
    const before = await namesAsked(worker);
    execFileSync('find', [mnt], { stdio: 'ignore' });
    return { idle, after, held: (await namesAsked(worker)) === before };
  } finally {
    await worker.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

/** LOOKUPs and listings the worker has served so far. */
async function namesAsked(worker) {
  const { ops } = await worker.client.request('stats', {});
  return ['lookup', 'readdir', 'readdirplus'].reduce((n, op) => n + (ops[op]?.count ?? 0), 0);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (x) => x.toFixed(1);

const lower = await tree();
const rounds = [];
for (let tries = 0; rounds.length < ROUNDS; tries++) {
  if (tries >= 3 * ROUNDS) throw new Error('the kernel kept forgetting entries (drop_caches?): no figures');
  const r = await round(lower);
  if (r.held) rounds.push(r);
  else console.log(`left out: the kernel forgot entries during the round (${fmt(r.after.at(-1).total)} MiB)`);
}
const idle = median(rounds.map((r) => r.idle.total));
console.log(
  `${DIRS} x ${FILES} files (${ENTRIES} entries), ${ROUNDS} rounds, medians; MiB private (Pss_Anon)`,
);
console.log(`idle: ${fmt(idle)} (glibc heap ${fmt(median(rounds.map((r) => r.idle.heap)))})`);
AFTER.forEach((seconds, i) => {
  const total = median(rounds.map((r) => r.after[i].total));
  const heap = median(rounds.map((r) => r.after[i].heap));
  const rest = median(rounds.map((r) => r.after[i].rest));
  const each = rounds.map((r) => fmt(r.after[i].total)).join(' / ');
  const perEntry = Math.round(((total - idle) * 1024 * 1024) / ENTRIES);
  console.log(
    `${seconds} s after find: ${fmt(total)} (${each}; glibc heap ${fmt(heap)}, rest ${fmt(rest)}), ` +
      `${perEntry} bytes per entry`,
  );
});
