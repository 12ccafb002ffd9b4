// The control plane's side of one worker process: spawn it with a socketpair on its fd 3 (no socket path
// exists, so nothing but this parent can talk to it), shake hands, and expose the typed client.
// Supervision policy (health pings, restarts) belongs to the control plane; this file only gives it the
// mechanisms: requests, events, exit notification, graceful stop, kill.
import type { ChildProcess } from 'node:child_process';
import { readdirSync } from 'node:fs';
import type { Socket } from 'node:net';
import os from 'node:os';
import {
  RpcPeer,
  UnavailableError,
  WorkerExitedError,
  clientHandshake,
  createSocketTransport,
  createWorkerClient,
  keepChildAlive,
} from '@agentfense/protocol';
import type { MountParams, WorkerClient, WorkerResult } from '@agentfense/protocol';
import { clearFuseMount } from './mounts.js';
import { startWorkerProcess, takeEarlyWorker, workerProgram } from './worker-process.js';
import type { WorkerProcessOptions } from './worker-process.js';

export {
  WORKER_BUNDLE,
  WORKER_ENTRY,
  WORKER_ENV,
  WORKER_NODE_FLAGS,
  workerProgram,
} from './worker-process.js';

export interface SpawnWorkerOptions extends WorkerProcessOptions {
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

  /**
   * Whether this worker keeps this process's event loop alive (its process, stderr pipe and connection;
   * yes by default). An idle worker waiting in a pool need not: it exits by itself when this process
   * does, since its connection closes.
   */
  keepProcessAlive(keep: boolean): void {
    keepChildAlive(this.#child, keep); // the process, its stderr pipe and its connection (fd 3)
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
    // A stop under way keeps the process alive until the worker is gone (an idle one did not).
    if (this.alive) this.keepProcessAlive(true);
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
  // A worker this process started early with the same command line (the one-shot CLI) is adopted.
  const processOptions = {
    logFile: options.logFile,
    ...(options.logLevel === undefined ? {} : { logLevel: options.logLevel }),
    ...(options.name === undefined ? {} : { name: options.name }),
  };
  const child = takeEarlyWorker(processOptions) ?? startWorkerProcess(processOptions);
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
