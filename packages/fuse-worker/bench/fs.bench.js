// FUSE mount benchmark: the same 10,000-file tree read natively and through a worker's mount, interleaved,
// median of several runs, ratio against the target. Run with `pnpm bench:fs` (builds first), as root
// (mounting, drop_caches). See bench/README.md for what each line means and recorded figures.
//
// Environment: BENCH_DIR (parent of the temp tree; default /var/tmp), BENCH_ROUNDS (default 5 warm / 3 cold),
// BENCH_QUICK=1 (fewer rounds, a 256 MiB big file: a smoke run, not figures to report), BENCH_ONLY (comma-separated
// phases: warm, latency, read, write, create, cold, firststat, coldread, memory; default all).
import console from 'node:console';
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import process from 'node:process';
import { promisify } from 'node:util';
import { clearFuseMount, isFuseMounted, spawnWorker } from '../dist/index.js';

const run = promisify(execFile);
const QUICK = process.env.BENCH_QUICK === '1';
const WARM_ROUNDS = Number(process.env.BENCH_ROUNDS ?? (QUICK ? 3 : 5));
const COLD_ROUNDS = Math.max(1, Math.min(WARM_ROUNDS, QUICK ? 1 : 3));
const BIG_MIB = QUICK ? 256 : 1024;
const WRITE_MIB = 100;
const DIRS = 100;
const FILES_PER_DIR = 100;
const LATENCY_OPS = 20_000;
const PYTHON = '/usr/bin/python3';
const MANY_WORKERS = 10;
const PHASES = ['warm', 'latency', 'read', 'write', 'create', 'cold', 'firststat', 'coldread', 'memory'];
const ONLY = new Set((process.env.BENCH_ONLY ?? PHASES.join(',')).split(',').filter((p) => p !== ''));
for (const p of ONLY) {
  if (!PHASES.includes(p)) throw new Error(`BENCH_ONLY: unknown phase ${p} (phases: ${PHASES.join(', ')})`);
}
/** Whether a phase runs (BENCH_ONLY lets one measure a line at a time, e.g. while profiling the worker). */
const phase = (name) => ONLY.has(name);

const RULES = [
  { pattern: '**', permission: 'read' },
  { pattern: '/out/**', permission: 'write' },
];

// The measuring child: every timed loop runs here, in another process (the worker is a third process;
// nothing in this process touches the mount synchronously except rm/mkdir helpers, which is allowed).
const TIMER_PY = String.raw`
import os, sys, time, subprocess
mode = sys.argv[1]
if mode == 'cmd':
    reps = int(sys.argv[2]); argv = sys.argv[3:]
    t = time.perf_counter()
    for _ in range(reps):
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print((time.perf_counter() - t) / reps)
else:
    n = int(sys.argv[2]); paths = sys.argv[3:]; k = len(paths)
    if mode == 'open':
        for p in paths: os.close(os.open(p, os.O_RDONLY))
        t = time.perf_counter()
        for i in range(n): os.close(os.open(paths[i % k], os.O_RDONLY))
    elif mode == 'stat':
        for p in paths: os.stat(p)
        t = time.perf_counter()
        for i in range(n): os.stat(paths[i % k])
    elif mode == 'firststat':
        t = time.perf_counter()
        for p in paths: os.stat(p)
        n = k
    elif mode == 'create':
        d, prefix = paths[0], paths[1]; data = b'x' * 100
        t = time.perf_counter()
        for i in range(n):
            fd = os.open(f'{d}/{prefix}{i}', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, data); os.close(fd)
    print((time.perf_counter() - t) / n)
`;

// --- cleanup that holds on failure and SIGINT -------------------------------------------------------------

const workers = new Set();
const mountpoints = new Set();
let base;
let cleaning;
async function cleanup() {
  cleaning ??= (async () => {
    for (const w of workers) await w.stop({ graceMs: 3000 }).catch(() => w.kill());
    workers.clear();
    if (base !== undefined) {
      let stale = false;
      for (const mp of mountpoints) {
        await clearFuseMount(mp).catch(() => undefined);
        if (await isFuseMounted(mp).catch(() => true)) stale = true;
      }
      if (!stale) {
        await rm(base, { recursive: true, force: true });
      } else {
        console.error(`bench: a mount under ${base} is still there; left ${base} in place`);
      }
    }
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(signal, () => {
    console.error(`\nbench: ${signal}, cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

// --- helpers ----------------------------------------------------------------------------------------------

const sh = (cmd, opts = {}) => run('bash', ['-c', cmd], { maxBuffer: 64 << 20, ...opts });
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
};

async function timer(args) {
  const { stdout } = await run(PYTHON, ['-c', TIMER_PY, ...args.map(String)], { maxBuffer: 16 << 20 });
  return Number(stdout.trim());
}
const timeCmd = (reps, argv) => timer(['cmd', reps, ...argv]);

async function dropCaches() {
  await sh('sync');
  await writeFile('/proc/sys/vm/drop_caches', '3');
}

/** A text file of ~2 KB: lines of words, a deterministic function of (d, f). */
function fileText(d, f) {
  const words = [
    'alpha',
    'beta',
    'gamma',
    'delta',
    'sandbox',
    'kernel',
    'worker',
    'cache',
    'policy',
    'mount',
  ];
  let text = '';
  let x = d * 131 + f * 7 + 1;
  while (text.length < 2000) {
    let line = `${d}:${f}:`;
    for (let i = 0; i < 10; i++) {
      x = (x * 1103515245 + 12345) & 0x7fffffff;
      line += ` ${words[x % words.length]}`;
    }
    text += `${line}\n`;
  }
  // A few files hold the needle grep looks for.
  return (d * FILES_PER_DIR + f) % 1000 === 7 ? `${text}needle here\n` : text;
}

async function generate(lower) {
  const tree = join(lower, 'tree');
  for (let d = 0; d < DIRS; d++) {
    const dir = join(tree, `d${String(d).padStart(2, '0')}`);
    await mkdir(dir, { recursive: true });
    const writes = [];
    for (let f = 0; f < FILES_PER_DIR; f++) {
      writes.push(writeFile(join(dir, `f${String(f).padStart(2, '0')}.txt`), fileText(d, f)));
    }
    await Promise.all(writes);
  }
  await mkdir(join(lower, 'out'));
  // Times in the past so the index written next is never "racily clean" (git would re-hash every file).
  await sh(`find ${lower} -exec touch -h -d @1700000000 {} +`);
  const git = 'git -c user.name=bench -c user.email=bench@localhost -c init.defaultBranch=main -c gc.auto=0';
  await sh(`cd ${tree} && ${git} init -q && ${git} add -A && ${git} commit -q -m tree && ${git} gc -q`);
  if (phase('read') || phase('coldread')) {
    await sh(`dd if=/dev/zero of=${join(lower, 'big.bin')} bs=1M count=${BIG_MIB} status=none`);
  }
  await sh('sync');
}

/** Per-op counts the worker saw between two `stats` answers, divided by runs. */
function opDelta(before, after, runs = 1) {
  const out = {};
  for (const [op, s] of Object.entries(after.ops)) {
    const n = s.count - (before?.ops[op]?.count ?? 0);
    // Fewer than one per run is shown with a decimal (e.g. one READDIR over five runs: 0.2).
    if (n > 0)
      out[op] = {
        count: n >= runs ? Math.round(n / runs) : Math.round((10 * n) / runs) / 10,
        p50Us: s.p50Us,
      };
  }
  return out;
}
const fmtOps = (ops) =>
  Object.entries(ops)
    .sort((a, b) => b[1].count - a[1].count)
    .map(([op, s]) => `${op} ${s.count} (p50 ${s.p50Us} µs)`)
    .join(', ') || '0 requests';

// --- the worker -------------------------------------------------------------------------------------------

let mountSeq = 0;
async function startMount(lower, mnt) {
  const n = ++mountSeq;
  const w = await spawnWorker({
    logFile: join(base, `worker-${n}.log`),
    name: `bench-${n}`,
    logLevel: 'warn',
  });
  workers.add(w);
  mountpoints.add(mnt);
  await w.mount({ lowerDir: lower, deltaDir: join(base, `delta-${n}`), mountpoint: mnt, rules: RULES });
  return w;
}
async function stopMount(w) {
  await w.stop();
  workers.delete(w);
}
const stats = (w) => w.client.request('stats', {});

// --- measurements -----------------------------------------------------------------------------------------

const results = [];
function report(name, native, mount, target, ops, note = '') {
  const ratio = mount / native;
  const met = target === null ? '' : ratio <= target ? 'met' : 'MISSED';
  results.push({ name, native, mount, ratio, target, met, ops, note });
  const unit = name.includes('per op') ? 'µs' : 's';
  const show = (x) => (unit === 'µs' ? (x * 1e6).toFixed(2) : x.toFixed(3));
  console.log(
    `${name.padEnd(28)} native ${show(native).padStart(8)} ${unit}  mount ${show(mount).padStart(8)} ${unit}  ` +
      `${ratio.toFixed(2).padStart(6)}x  target ${target === null ? '  -  ' : `≤${target}x`} ${met}`,
  );
  if (ops !== undefined) console.log(`${''.padEnd(28)} worker ops per run: ${fmtOps(ops)}`);
  if (note !== '') console.log(`${''.padEnd(28)} ${note}`);
}

/** Runs native and mount measurements alternately (so load spikes hit both), returns both medians. */
async function interleaved(rounds, nativeFn, mountFn) {
  const nat = [];
  const mnt = [];
  for (let r = 0; r < rounds; r++) {
    if (r % 2 === 0) {
      nat.push(await nativeFn(r));
      mnt.push(await mountFn(r));
    } else {
      mnt.push(await mountFn(r));
      nat.push(await nativeFn(r));
    }
  }
  return [median(nat), median(mnt)];
}

async function warmPhase(w, name, target, reps, argvFor, nativeRoot, mountRoot, warmups = 1) {
  // Warm-up runs on each side, then count the worker's ops over the timed runs only.
  for (let i = 0; i < warmups; i++) {
    await timeCmd(1, argvFor(nativeRoot));
    await timeCmd(1, argvFor(mountRoot));
  }
  const before = await stats(w);
  const [n, m] = await interleaved(
    WARM_ROUNDS,
    () => timeCmd(reps, argvFor(nativeRoot)),
    () => timeCmd(reps, argvFor(mountRoot)),
  );
  report(name, n, m, target, opDelta(before, await stats(w), WARM_ROUNDS * reps));
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error('run as root (mounts, drop_caches)');
  base = await mkdtemp(join(process.env.BENCH_DIR ?? '/var/tmp', 'agentfense-bench-'));
  const lower = join(base, 'lower');
  const mnt = join(base, 'mnt');
  await mkdir(mnt);
  const started = Date.now();
  const big = phase('read') || phase('coldread') ? ` + ${BIG_MIB} MiB file` : '';
  console.log(`generating ${DIRS * FILES_PER_DIR} files + git repo${big} in ${base} ...`);
  await generate(lower);
  const { stdout: kernel } = await sh('uname -r');
  const { stdout: load } = await sh('cat /proc/loadavg');
  console.log(
    `${new Date().toISOString()}  kernel ${kernel.trim()}  node ${process.version}  load ${load.split(' ').slice(0, 3).join(' ')}`,
  );
  console.log(`medians of ${WARM_ROUNDS} warm / ${COLD_ROUNDS} cold runs, native and mount interleaved\n`);

  // Idle PSS: a fresh worker, mounted, nothing done yet.
  let w = await startMount(lower, mnt);
  await new Promise((r) => setTimeout(r, 1000));
  const idle = await stats(w);
  // What the FUSE connection negotiated; AGENTFENSE_FUSE_DISABLE / AGENTFENSE_FUSE_ENABLE (read by the
  // workers this bench spawns) switch features for the per-feature table in the README.
  const f = idle.fuse;
  if (f !== undefined) {
    const on = Object.entries(f.features)
      .filter(([, v]) => v)
      .map(([k]) => k);
    console.log(
      `fuse: libfuse ${f.libfuse}, kernel protocol ${f.kernelProtocol}, max_write ${f.maxWrite / 1024} KiB; ` +
        `on: ${on.join(' ') || '-'}; left off: ${f.disabled.join(' ') || '-'}\n`,
    );
  }

  const nTree = join(lower, 'tree');
  const mTree = join(mnt, 'tree');
  // Two warm-ups: the first run's READs make the kernel re-ask attributes once per file at the next
  // stat (fuse_invalidate_atime); the second run pays that (see 'grep -r 2nd run' below).
  if (phase('warm')) {
    await warmPhase(w, 'grep -r warm', 1.5, 1, (t) => ['grep', '-r', 'needle', t], nTree, mTree, 2);
    await warmPhase(w, 'find warm', 2, 5, (t) => ['find', t], nTree, mTree);
    await warmPhase(
      w,
      'git status warm',
      null,
      1,
      (t) => ['git', '-C', t, 'status', '--porcelain'],
      nTree,
      mTree,
    );
  }

  // Per-op latencies on 100 files (warm: dentries, attributes and pages cached).
  const sample = (root) =>
    Array.from({ length: 100 }, (_, i) => join(root, `d${String(i).padStart(2, '0')}`, 'f42.txt'));
  for (const [mode, name] of phase('latency')
    ? [
        ['open', 'open+close per op'],
        ['stat', 'stat per op'],
      ]
    : []) {
    const before = await stats(w);
    const [n, m] = await interleaved(
      WARM_ROUNDS,
      () => timer([mode, LATENCY_OPS, ...sample(nTree)]),
      () => timer([mode, LATENCY_OPS, ...sample(mTree)]),
    );
    report(name, n, m, null, opDelta(before, await stats(w), WARM_ROUNDS * LATENCY_OPS));
  }

  // 1 GiB sequential read, warm (page cache on both sides after a first read).
  const dd = (path) => ['dd', `if=${path}`, 'of=/dev/null', 'bs=1M'];
  if (phase('read')) {
    await warmPhase(w, `read ${BIG_MIB} MiB warm`, 1.2, 1, (r) => dd(join(r, 'big.bin')), lower, mnt);
  }

  // 100 MB write into the write area, with conv=fsync (data on disk when dd returns) and without. Only
  // the dd is timed. The previous run's file is removed first, untimed, and given 100 ms to be freed:
  // natively rm frees it itself, the worker when the kernel forgets the node, in its thread pool, just
  // after rm returned. Timing rm + dd and subtracting an rm-only run would take native's freeing of the
  // file just written (30 ms for 100 MiB written out) off a dd that never paid it, and not the worker's,
  // which happens later.
  for (const fsync of phase('write') ? [true, false] : []) {
    const ddw = (dir) => [
      'dd',
      'if=/dev/zero',
      `of=${dir}/out/w.bin`,
      'bs=1M',
      `count=${WRITE_MIB}`,
      'status=none',
      ...(fsync ? ['conv=fsync'] : []),
    ];
    const removed = async (dir) => {
      await rm(join(dir, 'out/w.bin'), { force: true });
      await new Promise((r) => setTimeout(r, 100));
    };
    const before = await stats(w);
    const [n, m] = await interleaved(
      WARM_ROUNDS,
      async () => {
        await removed(lower);
        return timeCmd(1, ddw(lower));
      },
      async () => {
        await removed(mnt);
        return timeCmd(1, ddw(mnt));
      },
    );
    report(
      `write ${WRITE_MIB} MiB${fsync ? ' fsync' : ' no fsync'}`,
      n,
      m,
      2,
      opDelta(before, await stats(w), WARM_ROUNDS),
      'dd alone; the previous file removed before, untimed, and 100 ms given to free it',
    );
  }
  // Creating files in a directory that already holds 2,000: a `tar x`, a build's outputs, `npm install`.
  // Each is a GETATTR of the directory (its attributes changed with the last create), a LOOKUP of the
  // name, the CREATE and a 100-byte WRITE. No target in the issue; kept so the cost stays visible.
  if (phase('create')) {
    const dirs = [join(lower, 'out', 'creates-native'), join(mnt, 'out', 'creates')];
    for (const d of dirs) {
      await mkdir(d);
      await timer(['create', 2000, d, 'pre']);
    }
    const before = await stats(w);
    const [n, m] = await interleaved(
      WARM_ROUNDS,
      (r) => timer(['create', 500, dirs[0], `n${r}-`]),
      (r) => timer(['create', 500, dirs[1], `m${r}-`]),
    );
    report(
      'create per op',
      n,
      m,
      null,
      opDelta(before, await stats(w), 500 * WARM_ROUNDS),
      'open(O_WRONLY|O_CREAT|O_EXCL) + a 100-byte write + close, in a directory of 2,000+ files',
    );
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  }
  const worked = await stats(w);
  await stopMount(w);

  // Cold: host caches dropped, and for the mount a fresh worker (no dentries, attributes or pages).
  let coldOps;
  let secondOps;
  const coldPss = [];
  const second = { native: [], mount: [] };
  if (phase('cold')) {
    const grep = (t) => ['grep', '-r', 'needle', t];
    const [gn, gm] = await interleaved(
      COLD_ROUNDS,
      async () => {
        await dropCaches();
        const t = await timeCmd(1, grep(nTree));
        second.native.push(await timeCmd(1, grep(nTree)));
        return t;
      },
      async () => {
        w = await startMount(lower, mnt);
        coldPss.push((await stats(w)).pssBytes);
        await dropCaches();
        const t = await timeCmd(1, grep(mTree));
        const afterCold = await stats(w);
        coldOps = opDelta(undefined, afterCold);
        second.mount.push(await timeCmd(1, grep(mTree)));
        secondOps = opDelta(afterCold, await stats(w));
        await stopMount(w);
        return t;
      },
    );
    report('grep -r cold', gn, gm, 2, coldOps);
    report(
      'grep -r 2nd run',
      median(second.native),
      median(second.mount),
      1.5,
      secondOps,
      'right after the cold run: the kernel invalidated atime on READ (a GETATTR per file, or a READDIRPLUS per directory with listingRefresh; listing-replay: those answered from the remembered listing)',
    );
  }

  // Lookup round trip: first stat of 1000 files after a fresh mount, host caches warm.
  if (phase('firststat')) {
    let firstOps;
    const firstFiles = (root) =>
      Array.from({ length: 1000 }, (_, i) =>
        join(
          root,
          `d${String(i % DIRS).padStart(2, '0')}`,
          `f${String(Math.floor(i / DIRS)).padStart(2, '0')}.txt`,
        ),
      );
    await timer(['firststat', 0, ...firstFiles(nTree)]);
    const [fn, fm] = await interleaved(
      WARM_ROUNDS,
      () => timer(['firststat', 0, ...firstFiles(nTree)]),
      async () => {
        w = await startMount(lower, mnt);
        await timer(['firststat', 0, join(mTree, 'd00')]);
        const before = await stats(w);
        const t = await timer(['firststat', 0, ...firstFiles(mTree)]);
        firstOps = opDelta(before, await stats(w), 1000);
        await stopMount(w);
        return t;
      },
    );
    report(
      'first stat (lookup) per op',
      fn,
      fm,
      10,
      firstOps,
      'one LOOKUP round trip per file; natively a warm dcache',
    );

    // The same under CPU contention (two busy loops on the 2 cores): what a mount costs while sandboxes
    // compute. Every extra thread wakeup per request waits for the scheduler here.
    const busy = async (fn) => {
      const hogs = [0, 1].map(() => spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }));
      try {
        await new Promise((r) => setTimeout(r, 100));
        return await fn();
      } finally {
        for (const h of hogs) h.kill('SIGKILL');
      }
    };
    let busyOps;
    const [bn, bm] = await interleaved(
      WARM_ROUNDS,
      () => busy(() => timer(['firststat', 0, ...firstFiles(nTree)])),
      async () => {
        w = await startMount(lower, mnt);
        await timer(['firststat', 0, join(mTree, 'd00')]);
        const before = await stats(w);
        const t = await busy(() => timer(['firststat', 0, ...firstFiles(mTree)]));
        busyOps = opDelta(before, await stats(w), 1000);
        await stopMount(w);
        return t;
      },
    );
    report('first stat per op, busy CPUs', bn, bm, 20, busyOps, 'as above, with two busy loops running');

    // The same once the entry warm-up (fs/entry-warmup.ts) is done: what a command gets after the sandbox's
    // first access and an idle moment (an agent's think time), when the kernel already holds every entry.
    let settledOps;
    const warmups = [];
    const [sn, sm] = await interleaved(
      WARM_ROUNDS,
      () => timer(['firststat', 0, ...firstFiles(nTree)]),
      async () => {
        w = await startMount(lower, mnt);
        await timer(['firststat', 0, join(mTree, 'd00')]);
        const deadline = Date.now() + 30_000;
        let warmup;
        while ((warmup = (await stats(w)).warmup) === undefined && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 20));
        }
        if (warmup !== undefined) warmups.push(warmup);
        const before = await stats(w);
        const t = await timer(['firststat', 0, ...firstFiles(mTree)]);
        settledOps = opDelta(before, await stats(w), 1000);
        await stopMount(w);
        return t;
      },
    );
    const wu =
      warmups.length === 0
        ? 'no warm-up ran (entryWarmup off?)'
        : `warm-up: ${warmups[0].entries} entries, ${warmups[0].directories} directories, ${median(warmups.map((x) => x.ms)).toFixed(0)} ms (median)`;
    report(
      'first stat per op, warm-up done',
      sn,
      sm,
      null,
      settledOps,
      `after the first access and the entry warm-up; ${wu}`,
    );
  }

  // 1 GiB sequential read, cold.
  if (phase('coldread')) {
    const [rn, rm_] = await interleaved(
      COLD_ROUNDS,
      async () => {
        await dropCaches();
        return timeCmd(1, dd(join(lower, 'big.bin')));
      },
      async () => {
        w = await startMount(lower, mnt);
        await dropCaches();
        const t = await timeCmd(1, dd(join(mnt, 'big.bin')));
        coldOps = opDelta(undefined, await stats(w));
        await stopMount(w);
        return t;
      },
    );
    report(`read ${BIG_MIB} MiB cold`, rn, rm_, 1.2, coldOps);
  }

  // Many idle workers at once (a host with many sandboxes): the node binary's pages are then shared.
  const idleMany = [];
  const settledMany = [];
  if (phase('memory')) {
    const many = [];
    try {
      for (let i = 0; i < MANY_WORKERS; i++) {
        const mp = join(base, `mnt-${i}`);
        await mkdir(mp);
        many.push(await startMount(lower, mp));
      }
      const sample = async (into) => {
        for (const mw of many) {
          const rollup = await readFile(`/proc/${mw.pid}/smaps_rollup`, 'utf8');
          const kb = (key) =>
            Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? NaN) * 1024;
          into.push({ pss: kb('Pss'), anon: kb('Pss_Anon') });
        }
      };
      // The target's figure: 2 s after the last mount.
      await new Promise((r) => setTimeout(r, 2000));
      await sample(idleMany);
      // And once V8 has shrunk the young generation it grew during start-up and mount: it does so only in a
      // collection that finds the allocation rate of the last seconds low (worker/idle-trim.ts).
      await new Promise((r) => setTimeout(r, 8000));
      await sample(settledMany);
    } finally {
      for (const mw of many) await stopMount(mw);
    }
  }
  const mib = (b) => (b === null ? 'n/a' : `${(b / 1048576).toFixed(1)} MiB`);
  const idlePss = median([idle.pssBytes, ...coldPss]);
  console.log(
    `\nworker PSS idle (mounted, median of ${1 + coldPss.length}) ${mib(idlePss)}  target < 15 MiB ` +
      `${idlePss < 15 * 1048576 ? 'met' : 'MISSED'};  after the warm phases ${mib(worked.pssBytes)} ` +
      `(RSS ${mib(worked.rssBytes)})`,
  );
  // The target is on the private part (what each extra worker adds): <= 12 MiB.
  if (idleMany.length > 0) {
    const manyPss = median(idleMany.map((x) => x.pss));
    const manyPrivate = median(idleMany.map((x) => x.anon));
    console.log(
      `worker idle with ${MANY_WORKERS} workers mounted (median): PSS ${mib(manyPss)}, of it private ` +
        `(Pss_Anon) ${mib(manyPrivate)}  target private <= 12 MiB ${manyPrivate <= 12 * 1048576 ? 'met' : 'MISSED'}`,
    );
    console.log(
      `  the same 8 s later (settled): PSS ${mib(median(settledMany.map((x) => x.pss)))}, private ` +
        `${mib(median(settledMany.map((x) => x.anon)))}`,
    );
  }
  console.log(`total ${((Date.now() - started) / 1000).toFixed(0)} s`);
  if (process.env.BENCH_JSON !== undefined) {
    await writeFile(
      process.env.BENCH_JSON,
      JSON.stringify({ results, idlePss, idleMany, settledMany, worked, fuse: idle.fuse }, null, 2),
    );
  }
}

try {
  await main();
} catch (err) {
  console.error('bench failed:', err);
  process.exitCode = 1;
} finally {
  await cleanup();
}
