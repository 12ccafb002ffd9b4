// The control plane's side of one worker process: spawn it with a socketpair on its fd 3 (no socket path
// exists, so nothing but this parent can talk to it), shake hands, and expose the typed client.
// Supervision policy (health pings, restarts) belongs to the control plane; this file only gives it the
// mechanisms: requests, events, exit notification, graceful stop, kill.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import type { Socket } from 'node:net';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  RpcPeer,
  UnavailableError,
  WorkerExitedError,
  clientHandshake,
  createSocketTransport,
  createWorkerClient,
} from '@agentfense/protocol';
import type { MountParams, WorkerClient, WorkerResult } from '@agentfense/protocol';
import { clearFuseMount } from './mounts.js';

/** The build directory. Under vitest the source is loaded, so point at the build next to it. */
const DIST = ((): string => {
  const here = fileURLToPath(import.meta.url);
  return here.endsWith('.ts') ? join(dirname(here), '..', 'dist') : dirname(here);
})();

/** The worker program as tsc built it: one ES module per source file. */
export const WORKER_ENTRY = join(DIST, 'main.js');

/**
 * The same program bundled into one module by scripts/bundle.js (`pnpm build`), which is what spawnWorker()
 * runs: ~2 MiB less memory per idle worker (bench/README.md, "Idle memory").
 */
export const WORKER_BUNDLE = join(DIST, 'worker.js');

let program: string | undefined;

/**
 * The bundle when it is at least as new as every file it was built from, else the unbundled build: after a
 * bare `tsc -b` (no bundling step) the bundle would run stale code. Decided once per process.
 */
export function workerProgram(): string {
  program ??= bundleIsFresh() ? WORKER_BUNDLE : WORKER_ENTRY;
  return program;
}

function bundleIsFresh(): boolean {
  try {
    const built = statSync(WORKER_BUNDLE).mtimeMs;
    const inputs = JSON.parse(readFileSync(join(DIST, 'worker.inputs.json'), 'utf8')) as string[];
    return inputs.every((input) => statSync(input).mtimeMs <= built);
  } catch {
    return false;
  }
}

export interface SpawnWorkerOptions {
  /** The worker's own JSON-lines log file (pino); created or appended to. */
  readonly logFile: string;
  readonly logLevel?: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  /** Shown in the worker's log lines and process title (a sandbox id). */
  readonly name?: string;
  /** Default timeout of requests, ms (none by default: mount and commit can be long). */
  readonly requestTimeoutMs?: number;
  /** How long to wait for the worker to start and answer the handshake. Default 10 s. */
  readonly startTimeoutMs?: number;
  /**
   * Nice value set right after the spawn (best effort): a worker spawned ahead of time starts at a low
   * priority so its start-up does not compete with sandboxes at work (raise it back with setPriority).
   */
  readonly priority?: number;
  /** Called with the pid as soon as the process exists (before the handshake). */
  readonly onSpawn?: (pid: number) => void;
}

/** How a worker process ended. */
export interface WorkerExit {
  readonly code: number | null;
  readonly signal: string | null;
}

/**
 * Node/V8 flags of the worker process, chosen by measuring PSS and per-op CPU (bench/README.md):
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
 * 27-45 % slower, MACHINE-NOTES).
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
 * - msgpackr's optional native string extractor is not loaded (one more shared object, and its loader's
 *   code in the bundle): it speeds up decoding messages full of long strings, and the worker receives
 *   small requests (file contents travel as binary, which it does not touch).
 */
export const WORKER_ENV: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: '131072',
  MALLOC_ARENA_MAX: '1',
  MSGPACKR_NATIVE_ACCELERATION_DISABLED: 'true',
};

/** Keep this much of the worker's stderr to explain a crash. */
const STDERR_TAIL_BYTES = 4096;

/** A running worker process. */
export class WorkerHandle {
  readonly pid: number;
  readonly client: WorkerClient;
  /** Resolves when the process has exited; never rejects. */
  readonly exited: Promise<WorkerExit>;
  readonly #child: ChildProcess;
  readonly #peer: RpcPeer;
  readonly #stderr: () => string;
  #exit: WorkerExit | undefined;
  #mountpoint: string | undefined;

  constructor(child: ChildProcess, peer: RpcPeer, exited: Promise<WorkerExit>, stderr: () => string) {
    if (child.pid === undefined) throw new UnavailableError('worker process has no pid');
    this.pid = child.pid;
    this.#child = child;
    this.#peer = peer;
    this.client = createWorkerClient(peer);
    this.#stderr = stderr;
    this.exited = exited.then((exit) => (this.#exit = exit));
  }

  /** False once the process has exited. */
  get alive(): boolean {
    return this.#exit === undefined;
  }

  /** The last bytes the worker wrote to stderr (a crash's stack trace). */
  get stderrTail(): string {
    return this.#stderr();
  }

  /** Mounts the view; resolves once the kernel mount is live. */
  async mount(params: MountParams): Promise<WorkerResult<'mount'>> {
    this.#mountpoint = params.mountpoint;
    return this.client.request('mount', params);
  }

  /**
   * Asks the worker to unmount and exit, waits up to `graceMs`, then kills it. Whatever happened, the
   * mountpoint is clear afterwards (a hung or dead worker's mount is aborted and detached).
   */
  async stop(options: { graceMs?: number } = {}): Promise<WorkerExit> {
    const graceMs = options.graceMs ?? 5000;
    if (this.alive && !this.#peer.closed) {
      await this.client.request('unmount', {}, { timeoutMs: graceMs }).catch(() => undefined);
    }
    this.#peer.close();
    const timer = setTimeout(() => this.kill(), graceMs);
    const exit = await this.exited;
    clearTimeout(timer);
    if (this.#mountpoint !== undefined) await clearFuseMount(this.#mountpoint);
    return exit;
  }

  /** SIGKILL now (works on a stopped process too). The mount is left for the caller to clear. */
  kill(): void {
    if (this.alive) this.#child.kill('SIGKILL');
  }
}

/**
 * Sets the nice value of every thread of a process (Linux keeps one per thread; threads started later
 * inherit their creator's). Failures (a gone pid, no CAP_SYS_NICE to raise it) are ignored.
 */
export function setPriority(pid: number, priority: number): void {
  let tids: number[];
  try {
    tids = readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    tids = [pid];
  }
  for (const tid of tids) {
    try {
      os.setPriority(tid, priority);
    } catch {
      // Best effort: the priority only affects speed.
    }
  }
}

/** Starts a worker process and completes the protocol handshake with it. */
export async function spawnWorker(options: SpawnWorkerOptions): Promise<WorkerHandle> {
  const entry = workerProgram();
  const argv = [
    ...WORKER_NODE_FLAGS,
    entry,
    '--log-file',
    options.logFile,
    '--log-level',
    options.logLevel ?? 'info',
  ];
  if (options.name !== undefined) argv.push('--name', options.name);
  // fd 3 'pipe' is a socketpair on Unix (libuv): the worker opens it as its control connection.
  const child = spawn(process.execPath, argv, {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
    env: { ...WORKER_ENV, ...process.env },
  });
  if (child.pid !== undefined) {
    if (options.priority !== undefined) setPriority(child.pid, options.priority);
    options.onSpawn?.(child.pid);
  }
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_TAIL_BYTES);
  });
  const exited = new Promise<WorkerExit>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', () => resolve({ code: null, signal: null }));
  });
  const socket = child.stdio[3] as Socket | null;
  if (socket === null || child.pid === undefined) {
    child.kill('SIGKILL');
    throw new UnavailableError(`could not start the worker (${process.execPath} ${entry})`);
  }
  const transport = createSocketTransport(socket);
  const describeExit = async (): Promise<never> => {
    const exit = await exited;
    throw new WorkerExitedError(
      `worker exited during start (code ${exit.code}, signal ${exit.signal}): ${stderr.trim() || 'no output'}`,
      { exitCode: exit.code, signal: exit.signal },
    );
  };
  try {
    await Promise.race([
      clientHandshake(transport, {
        timeoutMs: options.startTimeoutMs ?? 10_000,
        info: { name: options.name ?? null },
      }),
      describeExit(),
    ]);
  } catch (err) {
    child.kill('SIGKILL');
    transport.close();
    throw err;
  }
  const peer = new RpcPeer({
    transport,
    ...(options.requestTimeoutMs === undefined ? {} : { defaultTimeoutMs: options.requestTimeoutMs }),
  });
  // After exit, requests fail fast with the reason rather than a bare "connection closed".
  void exited.then((exit) =>
    peer.close(
      new WorkerExitedError(`worker ${child.pid} exited (code ${exit.code}, signal ${exit.signal})`, {
        exitCode: exit.code,
        signal: exit.signal,
      }),
    ),
  );
  return new WorkerHandle(child, peer, exited, () => stderr);
}
