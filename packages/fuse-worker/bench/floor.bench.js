// What a FUSE daemon can reach at best on the data lines of `pnpm bench:fs` (issue 15: 100 MiB write ≤ 2x
// native with and without fsync, 1 GiB warm read ≤ 1.2x). Compiles floor-fs.c (a C libfuse 3.14 daemon with
// nothing but the data path: no JS, no rules, no quota) and times it in several data-path variants (copy,
// splice, payload discarded, direct I/O) against native writes to the same filesystem and the worker itself,
// in one run, interleaved, medians. A line that misses its target for the C daemon cannot be met by a C fast
// path in the worker with the same kernel data path; that is what this bench is for. See bench/README.md.
//
// Run as root: `pnpm bench:fs-floor` (builds first). Needs gcc and libfuse3-dev (scripts/setup installs it).
// Environment: BENCH_DIR (default /var/tmp), BENCH_ROUNDS (default 7), BENCH_QUICK=1 (3 rounds, 256 MiB
// read file), BENCH_ONLY=write|read.
import console from 'node:console';
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
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
const PHASES = ['write', 'read'];
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
const sh = (cmd) => ['bash', '-c', cmd];
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
async function cleanup() {
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

async function startFloor(bin, backing, flags) {
  const child = spawn(bin, [backing, mnt, ...flags], { stdio: ['ignore', 'ignore', 'pipe'] });
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

async function startWorker(lower, delta) {
  worker = await spawnWorker({ logFile: join(base, 'worker.log'), name: 'floor-bench', logLevel: 'warn' });
  await worker.mount({
    lowerDir: lower,
    deltaDir: delta,
    mountpoint: mnt,
    rules: [{ pattern: '**', permission: 'write' }],
  });
}

/** A daemon's CPU time (ms) and minor page faults so far: they do not depend on the machine's load. */
async function daemonCost(pid) {
  const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  const tick = 1000 / 100; // USER_HZ
  return { cpuMs: (Number(f[11]) + Number(f[12])) * tick, minflt: Number(f[7]) };
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

/** As bench:fs's write lines: rm + dd, minus an rm-only run (the unlink of what dd wrote). */
async function writeOnce(dir, fsync) {
  const file = join(dir, 'w.bin');
  const dd = `rm -f ${file} && dd if=/dev/zero of=${file} bs=1M count=${WRITE_MIB} status=none${fsync ? ' conv=fsync' : ''}`;
  return (await timeCmd(sh(dd))) - (await timeCmd(sh(`rm -f ${file}`)));
}

const readOnce = (dir) => timeCmd(['dd', `if=${join(dir, 'big.bin')}`, 'of=/dev/null', 'bs=1M']);

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
}

try {
  await main();
} finally {
  await cleanup();
}
