// Worker supervision (contract §6): one worker per running sandbox (a host's control plane, a cluster
// node's agent), watched two ways — its exit (kill -9, crash) and a `stats` ping with a short timeout (a hung or SIGSTOPped worker answers nothing). A dead or
// hung worker is SIGKILLed, its mount aborted and cleared, and a new worker mounted at the same
// mountpoint under the still-running sandbox. Too many failures in a window and the sandbox goes to ERROR.
import { setTimeout as delay } from 'node:timers/promises';
import { TimeoutError, WrongStateError } from '@agentfense/protocol';
import { spawnWorker, type WorkerHandle } from '../handle.js';
import { clearFuseMount } from '../mounts.js';
import type { WorkerCgroup } from '../worker-cgroup.js';
import { requestWholeOn } from './whole-answer.js';
import { exitReasonOf, explainedCall } from './worker-exit.js';
import type {
  AuditEvent,
  LOG_LEVELS,
  MountParams,
  PermissionRule,
  RequestOptions,
  WorkerMethod,
  WorkerParams,
  WorkerResult,
} from '@agentfense/protocol';

/** What supervision logs through: pino, or anything with its level methods (the node agent adapts its own). */
export type SupervisorLogger = Record<(typeof LOG_LEVELS)[number], (obj: object, msg: string) => void>;

/** Supervision timing; the defaults notice a hang within ~5 s and a death at once. */
export interface SupervisionOptions {
  /** How often the worker is pinged with `stats` (ms). */
  readonly pingIntervalMs?: number;
  /** How long one ping may take (ms). A busy but healthy worker answers `stats` within milliseconds. */
  readonly pingTimeoutMs?: number;
  /** Consecutive failed pings that count as a hang. */
  readonly maxMissedPings?: number;
  /** Failures within `failureWindowMs` that put the sandbox in ERROR instead of restarting again. */
  readonly maxFailures?: number;
  readonly failureWindowMs?: number;
  /** Grace for a worker's clean unmount-and-exit on stop before it is killed (ms). */
  readonly stopGraceMs?: number;
}

export const DEFAULT_SUPERVISION: Required<SupervisionOptions> = {
  pingIntervalMs: 1000,
  pingTimeoutMs: 2000,
  maxMissedPings: 2,
  maxFailures: 3,
  failureWindowMs: 60_000,
  stopGraceMs: 5000,
};

/** How long a worker may take to mount (spawn → mounted is ~85 ms on an idle host). */
const MOUNT_TIMEOUT_MS = 30_000;

/** How long we wait for a SIGKILLed worker to be reaped before clearing its mount anyway. */
const KILL_REAP_MS = 5000;
/**
 * How long stop() gives the worker's unmount while an answer in parts is being fetched (a commit): the
 * worker first ends the commit between two files, answers what it applied, and waits for its parts.
 */
const LONG_STOP_GRACE_MS = 30_000;

export interface WorkerSupervisorOptions {
  readonly sandboxId: string;
  readonly mount: MountParams;
  readonly logFile: string;
  readonly logger: SupervisorLogger;
  readonly supervision?: SupervisionOptions | undefined;
  /**
   * Where unmounted workers come from (a pool of workers spawned ahead of time); default spawnWorker().
   * The mount request names the sandbox and its log file, so a pooled worker takes them on.
   */
  readonly spawn?: (() => Promise<WorkerHandle>) | undefined;
  /** The cgroup every worker of the sandbox runs in (its memory bound); null: none on this host. */
  readonly cgroup?: Promise<WorkerCgroup | null> | undefined;
  /** Audit batches from whichever worker is current. */
  readonly onAudit: (events: readonly AuditEvent[]) => void;
  /**
   * A new worker process serves the mount (first start and every restart), with the mount's answer (the
   * frozen layers its delta stands on).
   */
  readonly onWorker: (pid: number, mounted: WorkerResult<'mount'>) => void | Promise<void>;
  /** A worker was replaced; `count` restarts so far in this supervisor's life. */
  readonly onRestart: (reason: string) => void;
  /** Supervision gave up: the mount is cleared and no worker runs. */
  readonly onFatal: (reason: string) => void;
}

type Phase = 'running' | 'restarting' | 'failed' | 'stopped';

/** Supervises the worker of one running sandbox. Create with `WorkerSupervisor.start()`. */
export class WorkerSupervisor {
  readonly #options: WorkerSupervisorOptions;
  readonly #timing: Required<SupervisionOptions>;
  readonly #logger: SupervisorLogger;
  #mount: MountParams;
  #current: WorkerHandle;
  #phase: Phase = 'running';
  #restarting: Promise<void> | undefined;
  #failures: number[] = [];
  #missed = 0;
  #pinging = false;
  /** requestWhole calls in progress (stop() then waits longer for the unmount). */
  #wholeRequests = 0;
  #fatalReason: string | undefined;
  /** Whether the worker keeps this process alive (false while an idle spare waits to be taken). */
  #keepAlive = true;
  readonly #timer: NodeJS.Timeout;
  /** The cgroup every worker of the sandbox runs in; null without one. */
  readonly #cgroup: WorkerCgroup | null;
  /** Why each worker exited, once it has (worker-exit.ts). */
  readonly #exits = new WeakMap<WorkerHandle, Promise<string>>();

  private constructor(options: WorkerSupervisorOptions, worker: WorkerHandle, cgroup: WorkerCgroup | null) {
    this.#options = options;
    this.#cgroup = cgroup;
    this.#timing = { ...DEFAULT_SUPERVISION, ...options.supervision };
    this.#logger = options.logger;
    this.#mount = options.mount;
    this.#current = worker;
    this.#attach(worker);
    this.#timer = setInterval(() => void this.#ping(), this.#timing.pingIntervalMs);
    this.#timer.unref();
  }

  /** Spawns a worker and mounts; on failure nothing is left running or mounted. */
  static async start(options: WorkerSupervisorOptions): Promise<WorkerSupervisor> {
    const worker = await spawnAndMount(options);
    return new WorkerSupervisor(options, worker, (await options.cgroup) ?? null);
  }

  /** The live worker's pid. */
  get pid(): number {
    return this.#current.pid;
  }

  /** Whether the worker, and any that replaces it, keeps this process's event loop alive (yes by default). */
  keepProcessAlive(keep: boolean): void {
    this.#keepAlive = keep;
    this.#current.keepProcessAlive(keep);
  }

  /** True while a replacement worker is being started. */
  get restarting(): boolean {
    return this.#phase === 'restarting';
  }

  /** The current worker, after any restart in progress. WrongStateError once supervision gave up or stopped. */
  async worker(): Promise<WorkerHandle> {
    if (this.#restarting !== undefined) await this.#restarting;
    if (this.#phase === 'failed') {
      throw new WrongStateError(`sandbox ${this.#options.sandboxId} is in ERROR: ${this.#fatalReason ?? ''}`);
    }
    if (this.#phase === 'stopped')
      throw new WrongStateError(`sandbox ${this.#options.sandboxId} is stopping`);
    return this.#current;
  }

  /** Calls a worker method on the current worker. */
  async request<M extends WorkerMethod>(
    method: M,
    params: WorkerParams<M>,
    options?: RequestOptions,
  ): Promise<WorkerResult<M>> {
    const worker = await this.worker();
    return this.#explained(worker, method, worker.client.request(method, params, options));
  }

  /**
   * Calls a worker method and fetches every part of its answer from that same worker, even once stop()
   * began: a commit a stop or destroy cuts short still answers with exactly what it wrote.
   */
  async requestWhole<M extends WorkerMethod>(method: M, params: WorkerParams<M>): Promise<WorkerResult<M>> {
    const worker = await this.worker();
    this.#wholeRequests++;
    try {
      return await this.#explained(worker, method, requestWholeOn(worker.client, method, params));
    } finally {
      this.#wholeRequests--;
    }
  }

  /** Replaces the rules now, and for every worker started after this. */
  async setRules(rules: readonly PermissionRule[]): Promise<void> {
    this.#mount = { ...this.#mount, rules };
    await this.request('setRules', { rules });
  }

  /** The bytes of the frozen layers the sandbox made, charged to its disk quota now and after restarts. */
  async setFrozenBytes(bytes: number): Promise<void> {
    this.#mount = { ...this.#mount, frozenBytes: bytes };
    await this.request('setFrozenBytes', { bytes });
  }

  /** Whether allowed accesses are audited, now and after restarts. */
  async setAudit(allowed: boolean): Promise<void> {
    this.#mount = { ...this.#mount, auditAllowed: allowed };
    await this.request('setAudit', { allowed });
  }

  /** Stops supervising, unmounts and ends the worker; the mountpoint is clear afterwards. */
  async stop(): Promise<void> {
    const wasFailed = this.#phase === 'failed';
    this.#phase = 'stopped';
    clearInterval(this.#timer);
    if (this.#restarting !== undefined) await this.#restarting.catch(() => undefined);
    const graceMs =
      this.#wholeRequests > 0
        ? Math.max(LONG_STOP_GRACE_MS, this.#timing.stopGraceMs)
        : this.#timing.stopGraceMs;
    if (!wasFailed) await this.#current.stop({ graceMs });
    await clearFuseMount(this.#mount.mountpoint);
  }

  /** SIGKILLs the worker without unmounting (tests, and a crashed control plane's view of things). */
  killWorker(): void {
    this.#current.kill();
  }

  #attach(worker: WorkerHandle): void {
    this.#missed = 0;
    if (!this.#keepAlive) worker.keepProcessAlive(false);
    worker.client.onEvent('audit', (events) => this.#options.onAudit(events));
    worker.client.onEvent('log', (event) => {
      const { level, msg, ...fields } = event;
      this.#logger[level]({ worker: worker.pid, ...fields }, msg);
    });
    // Its cgroup's OOM counter is read now: a kill for the memory bound shows as that counter growing. The
    // restart is begun before any caller hears why its call failed (reactions run in order).
    const exit = exitReasonOf(worker, this.#cgroup);
    this.#exits.set(worker, exit);
    void exit.then((reason) => {
      if (this.#current === worker && this.#phase === 'running') this.#fail(reason);
    });
  }

  async #ping(): Promise<void> {
    if (this.#phase !== 'running' || this.#pinging) return;
    const worker = this.#current;
    this.#pinging = true;
    try {
      await worker.client.request('stats', {}, { timeoutMs: this.#timing.pingTimeoutMs });
      this.#missed = 0;
    } catch (err) {
      if (this.#current !== worker || this.#phase !== 'running' || !worker.alive) return;
      this.#missed++;
      this.#logger.warn(
        { err, missed: this.#missed, worker: worker.pid },
        'worker did not answer a health check',
      );
      if (this.#missed >= this.#timing.maxMissedPings) {
        this.#fail(`worker ${worker.pid} stopped answering health checks (${this.#missed} missed)`);
      }
    } finally {
      this.#pinging = false;
    }
  }

  /** The call's answer, or an error saying why its worker exited if it died under the call. */
  #explained<T>(worker: WorkerHandle, method: string, call: Promise<T>): Promise<T> {
    const exit = this.#exits.get(worker);
    return explainedCall({ sandboxId: this.#options.sandboxId, method, call, exit });
  }

  /** Records a failure and restarts the worker, or gives up when failures come too often. */
  #fail(reason: string): void {
    if (this.#phase !== 'running') return;
    this.#phase = 'restarting';
    this.#logger.warn({ reason }, 'worker failed; restarting it');
    this.#restarting = this.#restart(reason).finally(() => {
      this.#restarting = undefined;
    });
  }

  async #restart(reason: string): Promise<void> {
    let why = reason;
    for (;;) {
      const old = this.#current;
      old.kill();
      await Promise.race([old.exited, delay(KILL_REAP_MS)]);
      await clearFuseMount(this.#mount.mountpoint).catch((err: unknown) => {
        this.#logger.error({ err }, 'could not clear the dead mount');
      });
      const now = Date.now();
      this.#failures = [...this.#failures.filter((t) => now - t < this.#timing.failureWindowMs), now];
      if (this.#failures.length >= this.#timing.maxFailures) {
        this.#giveUp(
          `${this.#failures.length} worker failures within ${this.#timing.failureWindowMs / 1000} s; last: ${why}`,
        );
        return;
      }
      if (this.#stopped) return;
      try {
        const worker = await spawnAndMount({ ...this.#options, mount: this.#mount });
        if (this.#stopped) {
          await worker.stop({ graceMs: this.#timing.stopGraceMs });
          return;
        }
        this.#current = worker;
        this.#attach(worker);
        this.#phase = 'running';
        this.#logger.info({ reason: why, worker: worker.pid }, 'worker restarted');
        this.#options.onRestart(why);
        return;
      } catch (err) {
        why = `restarting the worker failed: ${(err as Error).message}`;
        this.#logger.error({ err }, 'worker restart failed');
      }
    }
  }

  /** stop() was called (read through a getter: it changes across awaits, which narrowing cannot see). */
  get #stopped(): boolean {
    return this.#phase === 'stopped';
  }

  #giveUp(reason: string): void {
    this.#phase = 'failed';
    this.#fatalReason = reason;
    clearInterval(this.#timer);
    this.#logger.error({ reason }, 'worker supervision gave up');
    this.#options.onFatal(reason);
  }
}

/** One worker, mounted (within MOUNT_TIMEOUT_MS); killed and its mount cleared if the mount fails. */
export async function spawnAndMount(
  options: Pick<WorkerSupervisorOptions, 'sandboxId' | 'mount' | 'logFile' | 'spawn' | 'onWorker' | 'cgroup'>,
): Promise<WorkerHandle> {
  const worker = await (options.spawn?.() ??
    spawnWorker({ logFile: options.logFile, name: options.sandboxId }));
  let mounted: WorkerResult<'mount'>;
  try {
    // Before the mount: everything the worker holds for this sandbox is charged to its bound.
    await (await options.cgroup)?.attach(worker.pid);
    // A mount that never completes (a wedged kernel) must not hang start forever.
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new TimeoutError(`worker ${worker.pid} did not mount within ${MOUNT_TIMEOUT_MS} ms`)),
        MOUNT_TIMEOUT_MS,
      );
    });
    try {
      mounted = await Promise.race([
        worker.mount({ ...options.mount, logFile: options.logFile, name: options.sandboxId }),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  } catch (err) {
    worker.kill();
    await Promise.race([worker.exited, delay(KILL_REAP_MS)]);
    await clearFuseMount(options.mount.mountpoint).catch(() => undefined);
    throw err;
  }
  await options.onWorker(worker.pid, mounted);
  return worker;
}
