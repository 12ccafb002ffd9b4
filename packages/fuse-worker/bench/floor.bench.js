// What a FUSE daemon can reach at best on the data lines of `pnpm bench:fs` (targets: 100 MiB write ≤ 2x
// native with and without fsync, 1 GiB warm read ≤ 1.2x). Compiles floor-fs.c (a C libfuse 3.14 daemon with
// nothing but the data path: no JS, no rules, no quota) and times it in several data-path variants (copy,
// splice, payload discarded, direct I/O) against native writes to the same filesystem and the worker itself,
// in one run, interleaved, medians. A line that misses its target for the C daemon cannot be met by a C fast
// path in the worker with the same kernel data path; that is what this bench is for. See bench/README.md.
// The `firststat` phase does the same for bench:fs's first-stat line (≤ 10x native, ≤ 20x with busy CPUs):
// the first os.stat of 1,000 files in a fresh mount, one LOOKUP round trip each, through the C daemon (with
// a host fstatat per LOOKUP, and answering from a table taken at start: the bare round trip) and the worker.
//
// Run as root: `pnpm bench:fs-floor` (builds first). Needs gcc and libfuse3-dev (scripts/setup installs it).
// Environment: BENCH_DIR (default /var/tmp), BENCH_ROUNDS (default 7), BENCH_QUICK=1 (3 rounds, 256 MiB
// read file), BENCH_ONLY=write,read,firststat (comma-separated; default all).
import console from 'node:console';
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { clearFuseMount, isFuseMounted, spawnWorker } from '../dist/index.js';

const run = promisify(execFile);
const QUICK = process.env.BENCH_QUICK === '1';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (QUICK ? 3 : 7));
const READ_MIB = QUICK ? 256 : 1024;
const WRITE_MIB = 100;
const PHASES = ['write', 'read', 'firststat'];
const ONLY = new Set((process.env.BENCH_ONLY ?? PHASES.join(',')).split(',').filter((p) => p !== ''));
for (const p of ONLY) {
  if (!PHASES.includes(p)) throw new Error(`BENCH_ONLY: unknown phase ${p} (phases: ${PHASES.join(', ')})`);
}
// A WRITE received by splice must fit the daemon's pipe whole: header page + payload pages. An unprivileged
// pipe holds at most /proc/sys/fs/pipe-max-size (1 MiB = 256 pages here) and root lacks CAP_SYS_RESOURCE, so
// with 1 MiB requests (257 pages) libfuse falls back to read(); 1020 KiB keeps the splice.
const SPLICE_MAX_WRITE = ['--max-write', String(1024 * 1024 - 4096)];

const WRITE_CONFIGS = [
  { name: 'worker', worker: true },
  { name: 'C, copy', flags: [] },
  { name: 'C, copy, payload discarded', flags: ['--discard'] },
  { name: 'C, splice', flags: ['--splice-read', ...SPLICE_MAX_WRITE] },
  { name: 'C, splice, payload discarded', flags: ['--splice-read', '--discard', ...SPLICE_MAX_WRITE] },
  { name: 'C, direct_io, copy', flags: ['--direct-io'] },
  { name: 'C, direct_io, splice', flags: ['--direct-io', '--splice-read', ...SPLICE_MAX_WRITE] },
  { name: 'C, direct_io, discarded', flags: ['--direct-io', '--discard'] },
];
const READ_CONFIGS = [
  { name: 'C, copy', flags: [] },
  { name: 'C, splice-write replies', flags: ['--splice-write'] },
];

// The measuring child: the timed command runs in python (as bench:fs), never in this process.
const TIMER_PY = String.raw`
import sys, time, subprocess
t = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(time.perf_counter() - t)
`;
const timeCmd = async (argv) => Number((await run('/usr/bin/python3', ['-c', TIMER_PY, ...argv])).stdout);
// The first-stat child: exactly bench:fs's `firststat` mode (one os.stat per path, in order; seconds per stat).
const FIRSTSTAT_PY = String.raw`
import os, sys, time
paths = sys.argv[1:]
t = time.perf_counter()
for p in paths: os.stat(p)
print((time.perf_counter() - t) / len(paths))
`;
// The floor of any request/reply between two processes, FUSE or not: 2,000 one-byte pipe round trips
// between python and a forked child, each pinned to a CPU (seconds per round trip).
const PINGPONG_PY = String.raw`
import os, sys, time
n = 2000
a_r, a_w = os.pipe(); b_r, b_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.sched_setaffinity(0, {int(sys.argv[2])})
    for _ in range(n + 100): os.read(a_r, 1); os.write(b_w, b'x')
    os._exit(0)
os.sched_setaffinity(0, {int(sys.argv[1])})
for _ in range(100): os.write(a_w, b'x'); os.read(b_r, 1)
t = time.perf_counter()
for _ in range(n): os.write(a_w, b'x'); os.read(b_r, 1)
print((time.perf_counter() - t) / n)
os.waitpid(pid, 0)
`;
const pingPong = async ({ caller, daemon: other }) =>
  Number((await run('/usr/bin/python3', ['-c', PINGPONG_PY, caller, other])).stdout);
// `cpu`: pin the child to that CPU (taskset), to place it beside or away from the daemon.
const statEach = async (paths, cpu) => {
  const argv = ['/usr/bin/python3', '-c', FIRSTSTAT_PY, ...paths];
  const [cmd, ...args] = cpu === undefined ? argv : ['taskset', '-c', cpu, ...argv];
  return Number((await run(cmd, args, { maxBuffer: 1 << 20 })).stdout);
};
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
};

// --- cleanup that holds on failure and SIGINT -------------------------------------------------------------

let base;
let mnt;
let daemon = null;
let worker = null;
const hogs = new Set();
async function cleanup() {
  for (const h of hogs) h.kill('SIGKILL');
  if (worker !== null) await worker.stop({ graceMs: 3000 }).catch(() => worker.kill());
  worker = null;
  await stopFloor();
  if (base === undefined) return;
  await clearFuseMount(mnt).catch(() => undefined);
  if (await isFuseMounted(mnt).catch(() => true)) {
    console.error(`bench: ${mnt} is still mounted; left ${base} in place`);
    return;
  }
  await rm(base, { recursive: true, force: true });
}
// Output piped into `head` that exits: stop the daemon and unmount rather than die on EPIPE mid-run.
process.stdout.on('error', () => void cleanup().finally(() => process.exit(1)));
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(signal, () => {
    console.error(`\nbench: ${signal}, cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

// --- the C daemon and the worker ---------------------------------------------------------------------------

async function compile() {
  const src = join(dirname(fileURLToPath(import.meta.url)), 'floor-fs.c');
  const { stdout } = await run('pkg-config', ['--cflags', '--libs', 'fuse3']).catch(() => {
    throw new Error('pkg-config fuse3 failed: install libfuse3-dev (bash scripts/setup does)');
  });
  const bin = join(base, 'floor-fs');
  await run('gcc', ['-O2', '-Wall', '-o', bin, src, ...stdout.trim().split(/\s+/)]);
  return bin;
}

async function mounted(path) {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  return info.split('\n').some((line) => line.split(' ')[4] === path);
}

async function startFloor(bin, backing, flags, cpu) {
  // taskset execs the daemon: same pid, pinned to `cpu` from its first instruction.
  const argv = [bin, backing, mnt, ...flags];
  const [cmd, ...args] = cpu === undefined ? argv : ['taskset', '-c', cpu, ...argv];
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  daemon = { child, exited };
  for (let i = 0; i < 250 && !(await mounted(mnt)); i++) {
    if (child.exitCode !== null) throw new Error(`floor-fs exited: ${err}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  if (!(await mounted(mnt))) throw new Error(`floor-fs did not mount in 5 s: ${err}`);
}

async function stopFloor() {
  if (daemon === null) return;
  const { child, exited } = daemon;
  daemon = null;
  await run('fusermount3', ['-u', mnt]).catch(() => undefined);
  const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
  await exited;
  clearTimeout(timer);
}

async function startWorker(lower, delta, rules = [{ pattern: '**', permission: 'write' }]) {
  worker = await spawnWorker({ logFile: join(base, 'worker.log'), name: 'floor-bench', logLevel: 'warn' });
  await worker.mount({ lowerDir: lower, deltaDir: delta, mountpoint: mnt, rules });
}

/** A daemon's CPU time (ms) and minor page faults so far: they do not depend on the machine's load. */
async function daemonCost(pid) {
  const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  const tick = 1000 / 100; // USER_HZ
  return { cpuMs: (Number(f[11]) + Number(f[12])) * tick, minflt: Number(f[7]) };
}

/**
 * A process's CPU time so far in ns (schedstat: exact, where /proc/PID/stat counts 10 ms ticks): its main
 * thread (the worker's JS thread, which also reads /dev/fuse; the C daemon's only thread) and all threads.
 */
async function cpuNs(pid) {
  const ofTask = async (tid) =>
    Number((await readFile(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').catch(() => '0')).split(' ')[0]);
  let all = 0;
  for (const tid of await readdir(`/proc/${pid}/task`)) all += await ofTask(tid);
  return { main: await ofTask(String(pid)), all };
}

async function stopWorker() {
  await worker.stop();
  worker = null;
}

// --- measurements ----------------------------------------------------------------------------------------

function report(name, native, mount, target) {
  const ratio = mount / native;
  const met = target === null ? '' : ratio <= target ? 'met' : 'MISSED';
  console.log(
    `${name.padEnd(44)} native ${(native * 1000).toFixed(1).padStart(7)} ms  mount ${(mount * 1000).toFixed(1).padStart(7)} ms` +
      `  ${ratio.toFixed(2).padStart(5)}x  ${target === null ? '' : `target ≤${target}x ${met}`}`,
  );
}

/** Native and mount alternately (load spikes hit both), median of each. */
async function interleaved(nativeFn, mountFn) {
  const nat = [];
  const mount = [];
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2 === 0) {
      nat.push(await nativeFn());
      mount.push(await mountFn());
    } else {
      mount.push(await mountFn());
      nat.push(await nativeFn());
    }
  }
  return [median(nat), median(mount)];
}

/**
 * As bench:fs's write lines: only the dd is timed, after the previous file was removed (untimed) and given
 * 100 ms to be freed (natively and by a C daemon inside rm; by the worker when the kernel forgets the node).
 */
async function writeOnce(dir, fsync) {
  const file = join(dir, 'w.bin');
  await rm(file, { force: true });
  await new Promise((r) => setTimeout(r, 100));
  const dd = ['dd', 'if=/dev/zero', `of=${file}`, 'bs=1M', `count=${WRITE_MIB}`, 'status=none'];
  return timeCmd(fsync ? [...dd, 'conv=fsync'] : dd);
}

const readOnce = (dir) => timeCmd(['dd', `if=${join(dir, 'big.bin')}`, 'of=/dev/null', 'bs=1M']);

// --- first stat: one LOOKUP round trip per file (bench:fs's `firststat` line) ------------------------------

const DIRS = 100;
const STATS = 1000; // bench:fs's first-stat line: f00-f09 of each of the 100 directories
// f10-f19 too: the `second batch` line stats them after a first untimed batch, in the same fresh worker.
const FILES_PER_DIR = 20;
const FIRST_RULES = [
  { pattern: '**', permission: 'read' },
  { pattern: '/out/**', permission: 'write' },
];
// Where the daemon runs against the caller matters more than what it does (bench/README.md): `cpus` pins
// both (taskset, CPU numbers as strings) to show the round trip on one CPU and across the two.
const FIRST_CONFIGS = [
  { name: 'native' },
  { name: 'C, fstatat per LOOKUP', flags: [] },
  { name: 'C, table', flags: ['--table'] },
  { name: 'C, table, caller+daemon on CPU 0', flags: ['--table'], cpus: { caller: '0', daemon: '0' } },
  { name: 'C, table, caller CPU 1, daemon 0', flags: ['--table'], cpus: { caller: '1', daemon: '0' } },
  { name: 'worker', worker: true },
  { name: 'worker, caller+worker on CPU 0', worker: true, cpus: { caller: '0', daemon: '0' } },
  // The same worker's next 1,000 first stats: its lookup code compiled by V8 and the directories known.
  { name: 'worker, second batch', worker: true, secondBatch: true },
  { name: 'pipe round trip (no FUSE), one CPU', pipe: true, cpus: { caller: '0', daemon: '0' } },
  { name: 'pipe round trip (no FUSE), CPU 1<->0', pipe: true, cpus: { caller: '1', daemon: '0' } },
];

/** bench:fs's tree, as far as the first-stat line sees it: tree/dNN/fNN.txt, ~2 KB each. */
async function makeTree(lower) {
  const text = 'alpha beta gamma delta sandbox kernel worker cache policy mount\n'.repeat(32);
  for (let d = 0; d < DIRS; d++) {
    const dir = join(lower, 'tree', `d${String(d).padStart(2, '0')}`);
    await mkdir(dir, { recursive: true });
    for (let f = 0; f < FILES_PER_DIR; f++) {
      await writeFile(join(dir, `f${String(f).padStart(2, '0')}.txt`), text);
    }
  }
  await mkdir(join(lower, 'out'));
}

/**
 * bench:fs's order: d00/f00, d01/f00, ..., d99/f00, d00/f01, ... (each directory's first LOOKUP interleaved);
 * batch 1 is f10-f19 in the same order.
 */
const firstFiles = (root, batch = 0) =>
  Array.from({ length: STATS }, (_, i) => {
    const f = batch * (STATS / DIRS) + Math.floor(i / DIRS);
    return join(root, `d${String(i % DIRS).padStart(2, '0')}`, `f${String(f).padStart(2, '0')}.txt`);
  });

/** As bench:fs's busy(): two shell busy loops on the 2 cores while fn runs. */
async function busy(fn) {
  const loops = [0, 1].map(() => spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }));
  for (const h of loops) hogs.add(h);
  try {
    await new Promise((r) => setTimeout(r, 100));
    return await fn();
  } finally {
    for (const h of loops) {
      h.kill('SIGKILL');
      hogs.delete(h);
    }
  }
}

let firstSeq = 0;
/** One sample: a fresh mount, its `tree/d00` stat'ed first (as bench:fs), then the 1,000 timed first stats. */
async function firstStatSample(cfg, bin, lower, busyCpus) {
  const mTree = join(mnt, 'tree');
  const timed = () => statEach(firstFiles(mTree, cfg.secondBatch ? 1 : 0), cfg.cpus?.caller);
  if (cfg.worker) {
    await startWorker(lower, join(base, `delta-first-${++firstSeq}`), FIRST_RULES);
    // -a: every thread the worker has (JS, libuv pool, V8 platform); threads it starts later inherit it.
    if (cfg.cpus !== undefined) await run('taskset', ['-a', '-p', '-c', cfg.cpus.daemon, String(worker.pid)]);
  } else {
    await startFloor(bin, lower, cfg.flags, cfg.cpus?.daemon);
  }
  try {
    const pid = cfg.worker ? worker.pid : daemon.child.pid;
    await statEach(cfg.secondBatch ? firstFiles(mTree) : [join(mTree, 'd00')]);
    const before = cfg.worker ? await worker.client.request('stats', {}) : null;
    const cpu0 = await cpuNs(pid);
    const t = busyCpus ? await busy(timed) : await timed();
    const cpu1 = await cpuNs(pid);
    const perStat = (ns) => ns / 1e9 / STATS;
    const out = { t, cpuMain: perStat(cpu1.main - cpu0.main), cpuAll: perStat(cpu1.all - cpu0.all) };
    if (cfg.worker) {
      const lookup = (await worker.client.request('stats', {})).ops.lookup;
      out.lookups = (lookup.count - (before.ops.lookup?.count ?? 0)) / STATS;
      out.p50Us = lookup.p50Us;
    }
    return out;
  } finally {
    if (cfg.worker) await stopWorker();
    else await stopFloor();
  }
}

async function firstStatPhase(bin) {
  const lower = join(base, 'first');
  await makeTree(lower);
  const nTree = join(lower, 'tree');
  // The host's dcache: every daemon's host lookup and every native stat hits it.
  for (const batch of [0, 1]) await statEach(firstFiles(nTree, batch));
  for (const busyCpus of [false, true]) {
    const target = busyCpus ? 20 : 10;
    const load = (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
    console.log(
      `\nfirst stat of ${STATS} files in a fresh mount${busyCpus ? ', two busy loops running' : ''} ` +
        `(µs per stat; target ≤${target}x native; load ${load}):`,
    );
    const samples = FIRST_CONFIGS.map(() => []);
    for (let r = 0; r < ROUNDS; r++) {
      // Each round in another order, so a load spike does not always hit the same line.
      for (let k = 0; k < FIRST_CONFIGS.length; k++) {
        const i = (k + r) % FIRST_CONFIGS.length;
        const cfg = FIRST_CONFIGS[i];
        const plain =
          i === 0 ? () => statEach(firstFiles(nTree)) : cfg.pipe ? () => pingPong(cfg.cpus) : null;
        samples[i].push(
          plain !== null
            ? { t: await (busyCpus ? busy(plain) : plain()) }
            : await firstStatSample(cfg, bin, lower, busyCpus),
        );
      }
    }
    const nat = median(samples[0].map((s) => s.t));
    FIRST_CONFIGS.forEach((cfg, i) => {
      const s = samples[i];
      const t = median(s.map((x) => x.t));
      const us = (x) => (x * 1e6).toFixed(1);
      const range = `${us(Math.min(...s.map((x) => x.t)))}-${us(Math.max(...s.map((x) => x.t)))}`;
      let line = `  ${cfg.name.padEnd(34)} ${us(t).padStart(6)} µs (${range.padEnd(11)})`;
      if (i > 0) {
        const ratio = t / nat;
        // A pipe line is no mount: its ratio is only the scale against a native first stat.
        const met = cfg.pipe ? '' : ratio <= target ? 'met' : 'MISSED';
        line += ` ${ratio.toFixed(1).padStart(5)}x ${met.padEnd(6)}`;
      }
      if (i > 0 && !cfg.pipe) {
        const cpuMain = median(s.map((x) => x.cpuMain));
        const cpuAll = median(s.map((x) => x.cpuAll));
        line += `  daemon CPU per stat ${us(cpuMain)} µs`;
        if (cfg.worker) line += ` JS thread + ${us(cpuAll - cpuMain)} µs other threads`;
      }
      if (cfg.worker) {
        line += `; ${median(s.map((x) => x.lookups)).toFixed(2)} LOOKUP per stat, worker p50 ${s.at(-1).p50Us} µs`;
      }
      console.log(line);
    });
  }
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error('run as root (mounts)');
  const parent = process.env.BENCH_DIR ?? '/var/tmp';
  base = await mkdtemp(join(parent, 'agentfense-floor-'));
  const native = join(base, 'native');
  const backing = join(base, 'backing');
  const lower = join(base, 'lower');
  mnt = join(base, 'mnt');
  for (const d of [native, backing, lower, mnt]) await mkdir(d);
  const bin = await compile();
  const load = (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
  console.log(
    `${new Date().toISOString()}  kernel ${(await run('uname', ['-r'])).stdout.trim()}  load ${load}`,
  );
  console.log(
    `medians of ${ROUNDS} runs, native and mount interleaved; native = the same filesystem (${parent})\n`,
  );

  if (ONLY.has('write')) {
    for (const fsync of [true, false]) {
      console.log(`write ${WRITE_MIB} MiB${fsync ? ', conv=fsync' : ', no fsync'} (target ≤2x):`);
      for (const cfg of WRITE_CONFIGS) {
        if (cfg.worker) await startWorker(lower, join(base, `delta-${fsync ? 'f' : 'n'}`));
        else await startFloor(bin, backing, cfg.flags);
        await writeOnce(mnt, fsync); // warm-up: the create path, the inode, the daemon's buffers
        const pid = cfg.worker ? worker.pid : daemon.child.pid;
        const cost = await daemonCost(pid);
        const [n, m] = await interleaved(
          () => writeOnce(native, fsync),
          () => writeOnce(mnt, fsync),
        );
        report(`  ${cfg.name}`, n, m, 2);
        const after = await daemonCost(pid);
        const per = (x) => (x / ROUNDS).toFixed(0);
        console.log(
          `${''.padEnd(46)}daemon per run: ${per(after.cpuMs - cost.cpuMs)} ms CPU, ` +
            `${per(after.minflt - cost.minflt)} minor page faults`,
        );
        if (cfg.worker) await stopWorker();
        else await stopFloor();
      }
    }
  }

  if (ONLY.has('read')) {
    await run('dd', [
      'if=/dev/zero',
      `of=${join(backing, 'big.bin')}`,
      'bs=1M',
      `count=${READ_MIB}`,
      'status=none',
    ]);
    console.log(`\nread ${READ_MIB} MiB (host page cache warm on both sides):`);
    for (const cfg of READ_CONFIGS) {
      await startFloor(bin, backing, cfg.flags);
      await readOnce(backing);
      await readOnce(mnt);
      const [n, m] = await interleaved(
        () => readOnce(backing),
        () => readOnce(mnt),
      );
      report(`  warm, ${cfg.name}`, n, m, 1.2);
      await stopFloor();
      // A fresh mount per run: every byte is a READ the daemon answers (the host's cache stays warm).
      const [cn, cm] = await interleaved(
        () => readOnce(backing),
        async () => {
          await startFloor(bin, backing, cfg.flags);
          const t = await readOnce(mnt);
          await stopFloor();
          return t;
        },
      );
      report(`  every byte a READ, ${cfg.name}`, cn, cm, null);
    }
  }

  if (ONLY.has('firststat')) await firstStatPhase(bin);
}

try {
  await main();
} finally {
  await cleanup();
}
