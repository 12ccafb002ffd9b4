// A few worker processes spawned ahead of time, so starting a sandbox pays only for the mount. A pooled
// worker is spawned and has shaken hands but has mounted nothing and holds no sandbox's data: it learns
// its sandbox, log file and rules from the `mount` request (one mount per worker, as always). The pool
// refills in the background after each take, spawns at most a few workers at once (node start-up is
// CPU-bound: twenty at once on two cores would miss the handshake timeout), and kills its idle workers
// on close(). Idle workers exit on their own if this process dies (their control connection closes).
// The control plane on one host and the node agent on a cluster node keep one each.
import { cpus } from 'node:os';
import { WrongStateError, type RuntimeLogger } from '@agentfense/protocol';
import { setPriority, spawnWorker, type WorkerHandle } from './handle.js';
import { POOL_WORKER_NAME } from './pool-worker.js';

/** Nice value of workers spawned for the pool until they are taken (then 0, like on-demand ones). */
const POOL_PRIORITY = 10;

/** Idle workers kept by default. */
export const DEFAULT_WORKER_POOL_SIZE = 1;

export interface WorkerPoolOptions {
  /** Idle workers to keep ready; 0 spawns every worker on demand. */
  readonly size: number;
  /** Where pooled workers log until their mount names their sandbox's log file. */
  readonly logFile: string;
  readonly logger: RuntimeLogger;
  /** Most worker spawns in flight at once; default max(2, CPUs). */
  readonly maxConcurrentSpawns?: number;
}

export class WorkerPool {
  readonly #options: WorkerPoolOptions;
  readonly #maxSpawns: number;
  /** Ready workers, oldest first. */
  readonly #idle: WorkerHandle[] = [];
  /** Spawns for the pool in flight (each adds its worker to #idle when done). */
  #refilling = 0;
  /** Pids of refill spawns still starting (reniced when a take() waits for them). */
  readonly #starting = new Set<number>();
  #spawning = 0;
  readonly #waiters: (() => void)[] = [];
  readonly #inFlight = new Set<Promise<unknown>>();
  #closed = false;

  constructor(options: WorkerPoolOptions) {
    this.#options = options;
    this.#maxSpawns = options.maxConcurrentSpawns ?? Math.max(2, cpus().length);
  }

  /** An unmounted worker: an idle one if ready, else a fresh one. The pool refills in the background. */
  async take(): Promise<WorkerHandle> {
    if (this.#closed) throw new WrongStateError('the worker pool is closed');
    let worker: WorkerHandle | undefined;
    for (;;) {
      while ((worker = this.#idle.shift()) !== undefined && !worker.alive);
      if (worker !== undefined || this.#inFlight.size === 0 || this.#closed) break;
      // A refill is under way and probably further along than a new spawn would be: wait for it, at
      // full priority now that someone needs it.
      for (const pid of this.#starting) setPriority(pid, 0);
      await Promise.race(this.#inFlight);
    }
    if (this.#closed) {
      worker?.kill();
      throw new WrongStateError('the worker pool is closed');
    }
    if (worker === undefined) worker = await this.#spawn();
    else {
      setPriority(worker.pid, 0);
      worker.keepProcessAlive(true);
    }
    this.#refill();
    return worker;
  }

  /**
   * Spawns one worker now, at full priority, unless one is idle or on its way: for a process that knows it
   * is about to start a sandbox (the one-shot CLI), so the spawn overlaps everything before the start.
   * It is kept even with size 0 (the next take() gets it) and is not refilled.
   */
  prewarm(): void {
    if (this.#closed || this.#idle.length > 0 || this.#inFlight.size > 0) return;
    this.#refilling++;
    const spawned = this.#spawn().then(
      (worker) => {
        if (this.#closed) return worker.stop({ graceMs: 1000 }).then(() => undefined);
        this.#addIdle(worker);
        return undefined;
      },
      (err: unknown) => this.#options.logger.warn({ err }, 'could not spawn a worker ahead'),
    );
    const tracked = spawned.finally(() => {
      this.#refilling--;
      this.#inFlight.delete(tracked);
    });
    this.#inFlight.add(tracked);
  }

  /** Kills the idle workers and any spawned later by refills in flight. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const idle = this.#idle.splice(0);
    await Promise.all([
      ...idle.map((w) => w.stop({ graceMs: 1000 }).catch(() => undefined)),
      ...[...this.#inFlight].map((p) => p.catch(() => undefined)),
    ]);
  }

  /** Pids of the idle workers (memory accounting). */
  get idlePids(): number[] {
    return this.#idle.filter((w) => w.alive).map((w) => w.pid);
  }

  #refill(): void {
    while (!this.#closed && this.#idle.length + this.#refilling < this.#options.size) {
      this.#refilling++;
      let pid: number | undefined;
      const spawned = this.#spawn({
        priority: POOL_PRIORITY,
        onSpawn: (p) => {
          pid = p;
          this.#starting.add(p);
        },
      }).then(
        (worker) => {
          if (this.#closed) return worker.stop({ graceMs: 1000 }).then(() => undefined);
          this.#addIdle(worker);
          return undefined;
        },
        // Not retried here (a broken host would spin): the next take() spawns on demand and refills.
        (err: unknown) => this.#options.logger.warn({ err }, 'could not spawn a pooled worker'),
      );
      const tracked = spawned.finally(() => {
        if (pid !== undefined) this.#starting.delete(pid);
        this.#refilling--;
        this.#inFlight.delete(tracked);
      });
      this.#inFlight.add(tracked);
    }
  }

  /**
   * A ready worker waits here, not keeping the process alive (it exits by itself with this process: its
   * connection closes), and leaves the list if it dies meanwhile.
   */
  #addIdle(worker: WorkerHandle): void {
    worker.keepProcessAlive(false);
    this.#idle.push(worker);
    void worker.exited.then(() => {
      const i = this.#idle.indexOf(worker);
      if (i >= 0) this.#idle.splice(i, 1);
    });
  }

  /** Spawns one worker, waiting for a slot when too many spawns are under way. */
  async #spawn(extra: { priority?: number; onSpawn?: (pid: number) => void } = {}): Promise<WorkerHandle> {
    while (this.#spawning >= this.#maxSpawns) {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
    this.#spawning++;
    try {
      return await spawnWorker({ logFile: this.#options.logFile, name: POOL_WORKER_NAME, ...extra });
    } finally {
      this.#spawning--;
      this.#waiters.shift()?.();
    }
  }
}
