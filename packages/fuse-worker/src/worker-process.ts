// Starting the worker process, without the rest of the package (no msgpack, no FUSE binding): a one-shot
// CLI starts its worker from its first lines, before it loads anything else, so the worker's own node
// start-up overlaps the CLI's (`startEarlyWorker`); spawnWorker() then adopts that process instead of
// spawning another one (`takeEarlyWorker`), and shakes hands with it as with any other.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// The name of a worker spawned ahead of time; the one-shot CLI's early worker must match the pool's.
export { POOL_WORKER_NAME } from './pool-worker.js';

/** The build directory. Under vitest the source is loaded, so point at the build next to it. */
const DIST = ((): string => {
  const here = fileURLToPath(import.meta.url);
  return here.endsWith('.ts') ? join(dirname(here), '..', 'dist') : dirname(here);
})();

/** The worker program as tsc built it: one ES module per source file. */
export const WORKER_ENTRY = join(DIST, 'main.js');

/**
 * The same program bundled into one module by scripts/bundle.js (`pnpm build`), which is what spawnWorker()
 * runs: ~2 MiB less memory per idle worker (docs/decisions.md, "The worker runs as one bundled ES module with
 * its own log writer").
 */
export const WORKER_BUNDLE = join(DIST, 'worker.js');

let program: string | undefined;

/**
 * The bundle when it is at least as new as the last `tsc -b` of every package it was built from (their
 * .tsbuildinfo, listed by scripts/bundle.js), else the unbundled build: after a bare `tsc -b` (no bundling
 * step) the bundle would run stale code. Decided once per process.
 */
export function workerProgram(): string {
  program ??= bundleIsFresh() ? WORKER_BUNDLE : WORKER_ENTRY;
  return program;
}

function bundleIsFresh(): boolean {
  try {
    const built = statSync(WORKER_BUNDLE).mtimeMs;
    const builds = JSON.parse(readFileSync(join(DIST, 'worker.inputs.json'), 'utf8')) as string[];
    return builds.every((info) => statSync(info).mtimeMs <= built);
  } catch {
    return false;
  }
}

/**
 * Node/V8 flags of the worker process, chosen by measuring PSS and per-op CPU (docs/decisions.md,
 * "Every worker runs with the same V8 flags and one malloc arena"):
 * - `--max-semi-space-size=1` (MiB): V8's young generation otherwise grows to 3 x 16 MiB under a burst
 *   of FUSE requests (every request allocates a little) and keeps it: 70 -> 40 MiB PSS after a
 *   `grep -r` over 10,000 files, with no measurable cost per op (scavenges of 1 MiB are short).
 * - `--v8-pool-size=1`: one V8 background thread instead of one per core; each thread's malloc arena
 *   and stack cost ~1-2 MiB, and the worker's JS is short request handlers, not heavy compilation.
 * - `--expose-gc`: lets the worker run a memory-reducing collection when it goes quiet
 *   (worker/idle-trim.ts): V8 otherwise keeps the young generation it
 *   grew for the last burst (idle private memory -1 to -1.5 MiB).
 * Not used: `--single-threaded` (0.2 MiB less once bundled, but a fresh worker's lookups measured ~20 %
 * slower: 6 of 6 runs at a p50 of 23 µs against 16-19 µs), `--optimize-for-size` (no idle saving
 * measured; +10-25 % CPU per lookup) and `--jitless`/`--lite-mode` (another ~0.3 MiB once bundled;
 * 27-45 % slower per op, measured on this kind of machine).
 */
export const WORKER_NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=1',
  '--v8-pool-size=1',
  '--expose-gc',
];

/**
 * Environment of the worker.
 * - glibc malloc: a fixed mmap threshold of 128 KiB keeps every WRITE payload (128 KiB + header,
 *   malloc'd by the binding per request, freed when JS drops the Buffer) in its own mapping that goes back
 *   to the kernel when freed; by default glibc raises the threshold after the first free and the payloads
 *   then come from an arena, where they stayed resident: ~30 MiB more PSS after a 100 MB write (measured
 *   when the binding still had a session thread with its own arena).
 * - `MALLOC_ARENA_MAX=1`: every thread allocates from glibc's main heap. V8's helper thread otherwise
 *   gets an arena of its own for its compilation jobs, which kept ~3.5 MiB resident in most idle
 *   workers after start-up and 10-14 MiB after a burst of work (private memory 7 s after three 100 MB
 *   writes: 25-29 -> 15-16 MiB). The JS thread is the only busy allocator, so there is no contention.
 * - `UV_THREADPOOL_SIZE=4` (libuv's default, named here): the read-ahead across files runs on the
 *   binding's own threads (fs/store-ahead.ts), not in this pool. Big READs, listings and lookups that
 *   miss the directory-fd cache use it; a cold 1 GiB read measured the same with 4 and 10 threads
 *   (bench/README.md, "Measured, with no decision record").
 * - msgpackr's optional native string extractor is not loaded (one more shared object, and its loader's
 *   code in the bundle): it speeds up decoding messages full of long strings, and the worker receives
 *   small requests (file contents travel as binary, which it does not touch).
 */
export const WORKER_ENV: Readonly<Record<string, string>> = {
  UV_THREADPOOL_SIZE: '4',
  MALLOC_MMAP_THRESHOLD_: '131072',
  MALLOC_ARENA_MAX: '1',
  MSGPACKR_NATIVE_ACCELERATION_DISABLED: 'true',
};

/** What the worker's command line is made of. */
export interface WorkerProcessOptions {
  /** The worker's own JSON-lines log file (pino); created or appended to. */
  readonly logFile: string;
  readonly logLevel?: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  /** Shown in the worker's log lines and process title (a sandbox id). */
  readonly name?: string;
}

function workerArgv(options: WorkerProcessOptions): string[] {
  const argv = [
    ...WORKER_NODE_FLAGS,
    workerProgram(),
    '--log-file',
    options.logFile,
    '--log-level',
    options.logLevel ?? 'info',
  ];
  if (options.name !== undefined) argv.push('--name', options.name);
  return argv;
}

/** Spawns a worker process; its control connection (a socketpair) is `child.stdio[3]`. */
export function startWorkerProcess(options: WorkerProcessOptions): ChildProcess {
  // fd 3 'pipe' is a socketpair on Unix (libuv): the worker opens it as its control connection.
  return spawn(process.execPath, workerArgv(options), {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
    env: { ...WORKER_ENV, ...process.env },
  });
}

/** The process started by startEarlyWorker() and not yet adopted, with the command line it got. */
interface EarlyWorker {
  readonly child: ChildProcess;
  readonly argv: string;
}

/**
 * Where the early worker is kept: on globalThis, not in a module variable, because a bundled program may
 * hold two copies of this module — the `agentfense` executable loads a small bundle of its own first
 * (the CLI's prelude, which starts the worker) and then the CLI's bundle (whose pool adopts it).
 */
const SLOT = Symbol.for('agentfense.fuse-worker.early-worker');
const slot = globalThis as { [SLOT]?: EarlyWorker | undefined };

/**
 * Starts a worker now, for a spawnWorker() with the same options that is about to come in this process.
 * If none comes (the command failed before it needed a worker), call discardEarlyWorker().
 */
export function startEarlyWorker(options: WorkerProcessOptions): void {
  discardEarlyWorker();
  slot[SLOT] = { child: startWorkerProcess(options), argv: workerArgv(options).join('\0') };
}

/** The early worker, if one was started with exactly these options and is still alive; else undefined. */
export function takeEarlyWorker(options: WorkerProcessOptions): ChildProcess | undefined {
  const taken = slot[SLOT];
  if (taken === undefined || taken.argv !== workerArgv(options).join('\0')) return undefined;
  slot[SLOT] = undefined;
  const { child } = taken;
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) {
    child.kill('SIGKILL');
    return undefined;
  }
  return child;
}

/** Kills an early worker nobody adopted (it would otherwise keep this process alive, waiting for it). */
export function discardEarlyWorker(): void {
  const left = slot[SLOT];
  slot[SLOT] = undefined;
  if (left === undefined) return;
  left.child.kill('SIGKILL');
  for (const stream of left.child.stdio) stream?.destroy();
}
