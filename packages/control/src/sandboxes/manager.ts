// Sandbox lifecycle (contract §6): create, start, stop, destroy, exec and the delta operations, with
// ownership across processes. Several control-plane processes may share one data directory: each running
// sandbox records its owner (pid + kernel start time); a process only ever drives sandboxes it owns, and a
// sandbox whose owner has died is recovered (mounts cleared, worker killed, marked STOPPED, delta kept).
import { randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { clearFuseMount, removeTree, spawnWorker } from '@agentfense/fuse-worker';
import type { WorkerHandle } from '@agentfense/fuse-worker';
import {
  DEFAULT_RESOURCES,
  InvalidArgumentError,
  NotFoundError,
  collectParts,
  WrongStateError,
  toAgentFenseError,
  validateEnv,
} from '@agentfense/protocol';
import type {
  AuditEvent,
  CommitMode,
  CommitResult,
  ChangeEntry,
  ExecResult,
  PermissionRule,
  ResourceLimits,
  RuntimeInstance,
  RuntimeTraits,
  WorkerMethod,
  WorkerParams,
  WorkerResult,
  WorkerStats,
} from '@agentfense/protocol';
import type { CodebaseService } from '../codebases/service.js';
import { newId, validateId } from '../ids.js';
import { ensurePrivateDir } from '../paths.js';
import type { DataLayout, SandboxPaths } from '../paths.js';
import { resolvePolicy } from '../policy.js';
import type { PresetRegistry } from '../presets/registry.js';
import { decodePageToken, encodePageToken, pageSize } from '../store/pagination.js';
import { sandboxInfo } from '../store/sandboxes.js';
import type { SandboxRow, SandboxStore } from '../store/sandboxes.js';
import { AuditWriter, readAudit } from './audit-log.js';
import type { AuditQuery } from './audit-log.js';
import { makeSharedBind, unmountAll } from './host-mounts.js';
import { isSameProcess, processStartTime, selfIdentity } from './process-identity.js';
import type { RuntimeRegistry } from './runtimes.js';
import { isOneShot } from './one-shot.js';
import { assertTransition } from './state.js';
import { WorkerSupervisor } from './supervisor.js';
import type { SupervisionOptions } from './supervisor.js';
import { DEFAULT_WORKER_POOL_SIZE, WorkerPool } from './worker-pool.js';
import type {
  CreateSandboxOptions,
  ListSandboxesOptions,
  Page,
  SandboxExecOptions,
  SandboxInfo,
} from './types.js';

/** Start of the state reason of a sandbox whose destroy failed (the reaper and gc retry those). */
export const DESTROY_FAILED = 'destroy failed: ';

/** How long the reaper waits before retrying a failed destroy. */
const DESTROY_RETRY_MS = 60_000;

/** Longest label key / value accepted. */
const MAX_LABEL_KEY = 128;
const MAX_LABEL_VALUE = 1024;

/** What a running sandbox holds in this process. */
interface Live {
  readonly supervisor: WorkerSupervisor;
  readonly instance: RuntimeInstance;
  readonly audit: AuditWriter;
}

export interface SandboxManagerOptions {
  readonly layout: DataLayout;
  readonly store: SandboxStore;
  readonly codebases: CodebaseService;
  readonly runtimes: RuntimeRegistry;
  readonly logger: Logger;
  readonly presets?: PresetRegistry | undefined;
  readonly supervision?: SupervisionOptions | undefined;
  /** The runtime of sandboxes created without one. Default 'bwrap'. */
  readonly defaultRuntime?: string | undefined;
  /** Called before a running sandbox's runtime stops (stop, destroy, ERROR): sessions close here. */
  readonly onStopping?: ((id: string) => Promise<void>) | undefined;
  /** Called after a worker was replaced under a running sandbox (with the sandbox's runtime name). */
  readonly onWorkerRestart?: ((id: string, runtime: string) => Promise<void>) | undefined;
  /** Idle workers kept spawned ahead of time once a sandbox has started (default 1; 0: none). */
  readonly workerPoolSize?: number | undefined;
  /** Limits of sandboxes that do not set them (default DEFAULT_RESOURCES; each field replaceable). */
  readonly defaultResources?: ResourceLimits | undefined;
}

export class SandboxManager {
  readonly #layout: DataLayout;
  readonly #store: SandboxStore;
  readonly #codebases: CodebaseService;
  readonly #runtimes: RuntimeRegistry;
  readonly #logger: Logger;
  readonly #presets: PresetRegistry | undefined;
  readonly #supervision: SupervisionOptions | undefined;
  readonly #defaultRuntime: string;
  readonly #onStopping: (id: string) => Promise<void>;
  readonly #onWorkerRestart: (id: string, runtime: string) => Promise<void>;
  readonly #self = { ...selfIdentity(), instance: randomUUID() };
  readonly #live = new Map<string, Live>();
  readonly #locks = new Map<string, Promise<unknown>>();
  readonly #pool: WorkerPool;
  readonly #defaultResources: ResourceLimits;
  #lastCreatedAt = 0;
  #closed = false;

  constructor(options: SandboxManagerOptions) {
    this.#layout = options.layout;
    this.#store = options.store;
    this.#codebases = options.codebases;
    this.#runtimes = options.runtimes;
    this.#logger = options.logger.child({ component: 'sandboxes' });
    this.#presets = options.presets;
    this.#supervision = options.supervision;
    this.#defaultRuntime = options.defaultRuntime ?? 'bwrap';
    this.#onStopping = options.onStopping ?? (() => Promise.resolve());
    this.#onWorkerRestart = options.onWorkerRestart ?? (() => Promise.resolve());
    this.#defaultResources = checkResources({ ...DEFAULT_RESOURCES, ...options.defaultResources });
    this.#pool = new WorkerPool({
      size: options.workerPoolSize ?? DEFAULT_WORKER_POOL_SIZE,
      logFile: join(options.layout.logsDir, 'worker-pool.log'),
      logger: this.#logger.child({ component: 'worker-pool' }),
    });
  }

  // --- Records -----------------------------------------------------------------------------------

  /** Creates a sandbox in PENDING; rules, runtime, labels, env and expiry are validated now. */
  async create(options: CreateSandboxOptions, internal: { own?: boolean } = {}): Promise<SandboxInfo> {
    this.#assertOpen();
    const codebaseId = validateId('codebase', options.codebaseId);
    this.#codebases.get(codebaseId); // NotFoundError naming it
    const rules = resolvePolicy({
      preset: options.preset,
      rules: options.rules,
      ...(this.#presets === undefined ? {} : { registry: this.#presets }),
    });
    const runtime = this.#runtimes.check(options.runtime ?? this.#defaultRuntime);
    const image = checkImage(runtime, (await this.#runtimes.get(runtime)).traits, options.image);
    const labels = checkLabels(options.labels ?? {});
    const env = validateEnv(options.env ?? {});
    // Every sandbox gets limits: what it asks for, the configured defaults for the rest.
    const resources = { ...this.#defaultResources, ...checkResources(options.resources ?? {}) };
    const expiresIn = options.expiresIn;
    if (
      expiresIn !== undefined &&
      !(typeof expiresIn === 'number' && Number.isFinite(expiresIn) && expiresIn > 0)
    ) {
      throw new InvalidArgumentError(
        `expiresIn must be a positive number of seconds, got ${String(expiresIn)}`,
      );
    }
    const id = newId('sandbox');
    // Strictly increasing within this process: listings are in creation order (created_at, then id).
    const now = Math.max(Date.now(), this.#lastCreatedAt + 1);
    this.#lastCreatedAt = now;
    // The record first, then the directory: `agentfense gc` removes directories without a record.
    this.#store.insert(
      {
        id,
        codebase_id: codebaseId,
        state: 'PENDING',
        state_reason: null,
        runtime,
        image,
        rules: JSON.stringify(rules),
        network: options.network === true ? 1 : 0,
        resources: JSON.stringify(resources),
        env: JSON.stringify(env),
        audit_allowed: options.auditAllowed === true ? 1 : 0,
        labels: JSON.stringify(labels),
        expires_at: expiresIn === undefined ? null : now + Math.round(expiresIn * 1000),
        created_at: now,
        updated_at: now,
      },
      labels,
    );
    await ensurePrivateDir(this.#layout.sandboxesDir);
    await ensurePrivateDir(this.#layout.sandbox(id).dir);
    // A caller that starts it at once (the one-shot CLI) owns it from birth: if the process dies before
    // the start, recovery sees a dead owner and settles the sandbox instead of leaving it PENDING.
    if (internal.own === true) {
      this.#store.update(id, {
        owner_pid: this.#self.pid,
        owner_start: this.#self.start,
        owner_instance: this.#self.instance,
      });
    }
    this.#logger.info({ sandboxId: id, codebaseId, runtime }, 'sandbox created');
    return this.get(id);
  }

  get(id: string): SandboxInfo {
    return sandboxInfo(this.#store.get(validateId('sandbox', id)));
  }

  /** Filtered listing in creation order, one page at a time. */
  list(options: ListSandboxesOptions = {}): Page<SandboxInfo> {
    const limit = pageSize(options.pageSize);
    const rows = this.#store.query({
      codebaseId: options.codebaseId === undefined ? undefined : validateId('codebase', options.codebaseId),
      state: options.state,
      labels: options.labels === undefined ? undefined : checkLabels(options.labels),
      after: options.pageToken === undefined ? undefined : decodePageToken(options.pageToken),
      limit: limit + 1,
    });
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    return {
      items: items.map(sandboxInfo),
      nextPageToken:
        rows.length > limit && last !== undefined
          ? encodePageToken({ createdAt: last.created_at, id: last.id })
          : null,
    };
  }

  /** The sandbox's audit trail (denials always; allowed accesses when it was asked for). */
  async audit(id: string, query: AuditQuery = {}): Promise<AuditEvent[]> {
    this.#store.get(validateId('sandbox', id));
    const live = this.#live.get(id);
    // The worker batches its events; a stats request flushes them ahead of its answer, so a query right
    // after a command sees that command's denials. A worker that does not answer changes nothing here.
    await live?.supervisor.request('stats', {}).catch(() => undefined);
    await live?.audit.flush();
    return readAudit(this.#layout.sandbox(id).auditLog, query);
  }

  // --- Lifecycle ---------------------------------------------------------------------------------

  /**
   * Starts the sandbox: directories, the shared bind mount, the worker and its mount, then the runtime.
   * On failure everything started is undone, the sandbox goes to ERROR with the reason, and the error
   * is thrown. Starting a sandbox this process already runs returns it unchanged.
   */
  start(id: string): Promise<SandboxInfo> {
    validateId('sandbox', id);
    return this.#withLock(id, async () => {
      this.#assertOpen();
      if (this.#live.has(id)) return this.get(id);
      const row = await this.#claim(id);
      const paths = this.#layout.sandbox(id);
      try {
        assertTransition(id, row.state, 'RUNNING');
      } catch (err) {
        this.#release(id);
        throw err;
      }
      let supervisor: WorkerSupervisor | undefined;
      let instance: RuntimeInstance | undefined;
      const audit = new AuditWriter(paths.auditLog, (err) =>
        this.#logger.error({ err, sandboxId: id }, 'could not write the audit trail'),
      );
      try {
        const t0 = performance.now();
        for (const dir of [paths.dir, paths.delta, paths.mnt, paths.state]) await ensurePrivateDir(dir);
        const runtime = await this.#runtimes.get(row.runtime);
        const { traits } = runtime;
        const resources = JSON.parse(row.resources) as ResourceLimits;
        await this.#clearMounts(paths, row.runtime);
        await makeSharedBind(paths.mnt);
        await ensurePrivateDir(paths.workspace);
        const t1 = performance.now();
        const lowerDir = await this.#codebases.existingLowerDir(row.codebase_id);
        let tWorker = t1;
        let tRuntime = t1;
        const supervising = WorkerSupervisor.start({
          sandboxId: id,
          mount: {
            lowerDir,
            deltaDir: paths.delta,
            mountpoint: paths.workspace,
            rules: JSON.parse(row.rules) as PermissionRule[],
            auditAllowed: row.audit_allowed !== 0,
            // A sandbox user whose host uid is not the mounter's needs allow_other ...
            allowOther: traits.needsAllowOther,
            // ... and owns the files it sees, so the owner mode bits carry the rules for it too.
            ...(traits.hostOwner === null
              ? {}
              : { ownerUid: traits.hostOwner.uid, ownerGid: traits.hostOwner.gid }),
            ...(resources.diskBytes === undefined ? {} : { diskQuotaBytes: resources.diskBytes }),
          },
          logFile: paths.workerLog,
          logger: this.#logger.child({ sandboxId: id }),
          supervision: this.#supervision,
          spawn: () => this.#pool.take(),
          onAudit: (events) => audit.append(events),
          onWorker: (pid) =>
            this.#store.update(id, { worker_pid: pid, worker_start: processStartTime(pid) ?? null }),
          onRestart: (reason) => this.#recordRestart(id, reason),
          onFatal: (reason) => void this.#onFatal(id, reason),
        }).then((started) => {
          tWorker = performance.now();
          return started;
        });
        const startRuntime = async (): Promise<RuntimeInstance> => {
          const started = await runtime.start({
            sandboxId: id,
            workspaceHostPath: paths.workspace,
            stateDir: paths.state,
            ...(row.image === null ? {} : { image: row.image }),
            network: row.network !== 0,
            resources,
            env: JSON.parse(row.env) as Record<string, string>,
          });
          tRuntime = performance.now();
          return started;
        };
        // A runtime that binds the workspace path only when each command starts (bwrap) starts while the
        // worker spawns and mounts; both are done before start() returns (so before any command). Others
        // (docker binds the path into its relay at start) wait for the mount.
        if (traits.startsBeforeMount) {
          const [worker, runtime] = await Promise.allSettled([supervising, startRuntime()]);
          if (worker.status === 'fulfilled') supervisor = worker.value;
          if (runtime.status === 'fulfilled') instance = runtime.value;
          if (worker.status === 'rejected') throw worker.reason;
          if (runtime.status === 'rejected') throw runtime.reason;
        } else {
          supervisor = await supervising;
          instance = await startRuntime();
        }
        if (supervisor === undefined || instance === undefined) throw new Error('unreachable');
        this.#live.set(id, { supervisor, instance, audit });
        this.#store.update(id, {
          state: 'RUNNING',
          state_reason: null,
          started_at: Date.now(),
          limits: JSON.stringify({ ...instance.limits, diskBytes: resources.diskBytes ?? null }),
        });
        const t3 = performance.now();
        this.#logger.info(
          {
            sandboxId: id,
            worker: supervisor.pid,
            // worker and runtime overlap for bwrap (each measured from the end of mounts).
            ms: { mounts: t1 - t0, worker: tWorker - t1, runtime: tRuntime - t1, total: t3 - t0 },
          },
          'sandbox started',
        );
        return this.get(id);
      } catch (err) {
        const error = toAgentFenseError(err, `starting sandbox ${id}`);
        await instance?.stop().catch((e: unknown) => this.#logger.warn({ err: e }, 'runtime stop failed'));
        await supervisor?.stop().catch((e: unknown) => this.#logger.warn({ err: e }, 'worker stop failed'));
        await this.#clearMounts(paths, row.runtime).catch((e: unknown) =>
          this.#logger.warn({ err: e }, 'unmount failed'),
        );
        await audit.flush();
        this.#store.update(id, {
          state: 'ERROR',
          state_reason: `start failed: ${error.message}`,
          owner_pid: null,
          owner_start: null,
          owner_instance: null,
          worker_pid: null,
          worker_start: null,
        });
        this.#logger.error({ sandboxId: id, err: error }, 'sandbox start failed');
        throw error;
      }
    });
  }

  /** Stops a running sandbox: runtime, worker, mounts; the delta stays. Idempotent on a stopped one. */
  stop(id: string, options: { reason?: string } = {}): Promise<SandboxInfo> {
    validateId('sandbox', id);
    return this.#withLock(id, async () => {
      await this.#stopLocked(id, options.reason ?? null);
      return this.get(id);
    });
  }

  /** Destroys the sandbox in any state: stops it, forgets it and removes its directory (the delta too unless `keepDelta`). */
  destroy(id: string, options: { keepDelta?: boolean } = {}): Promise<void> {
    validateId('sandbox', id);
    return this.#withLock(id, async () => {
      if (this.#live.has(id)) await this.#stopLocked(id, 'destroyed');
      // Claiming refuses a sandbox another live process runs, clears a dead owner's leftovers, and keeps
      // any other process from starting it while it is being removed.
      const claimed = await this.#claim(id);
      const paths = this.#layout.sandbox(id);
      // The record goes last: a destroy that fails half-way leaves the sandbox listed in ERROR with what
      // is left of its files (never files nobody knows about), and destroying it again, the reaper or
      // `agentfense gc` retry.
      try {
        await this.#clearMounts(paths, claimed.runtime);
        if (options.keepDelta === true) {
          for (const name of await readdir(paths.dir).catch(() => [] as string[])) {
            if (name !== 'delta') await removeTree(`${paths.dir}/${name}`);
          }
        } else {
          // Directory fds all the way down: a delta 3000 levels deep or with 200-character names is
          // removed too (paths past 4096 bytes cannot be handed to the kernel).
          await removeTree(paths.dir);
        }
      } catch (err) {
        const error = toAgentFenseError(err, `destroying sandbox ${id}`);
        this.#store.update(id, {
          state: 'ERROR',
          state_reason: `${DESTROY_FAILED}${error.message} (its files are kept; destroy it again to retry)`,
          stopped_at: Date.now(),
        });
        this.#release(id);
        this.#logger.error({ sandboxId: id, err: error }, 'sandbox destroy failed');
        throw error;
      }
      this.#store.delete(id);
      this.#logger.info({ sandboxId: id, keepDelta: options.keepDelta === true }, 'sandbox destroyed');
    });
  }

  // --- Commands and the delta ---------------------------------------------------------------------

  /** Runs one command in a RUNNING sandbox of this process (waits for a worker restart in progress). */
  async exec(
    id: string,
    command: string | readonly string[],
    options: SandboxExecOptions = {},
  ): Promise<ExecResult> {
    const live = this.#requireLive(id);
    await live.supervisor.worker();
    return live.instance.exec({ ...options, command });
  }

  /** The worker's resource and activity report (running sandboxes of this process). */
  workerStats(id: string): Promise<WorkerStats> {
    return this.#requireLive(id).supervisor.request('stats', {});
  }

  /** The runtime instance of a running sandbox (sessions spawn their shells through it). */
  runtimeInstance(id: string): RuntimeInstance {
    return this.#requireLive(id).instance;
  }

  changes(id: string): Promise<readonly ChangeEntry[]> {
    return this.#withWorker(id, 'changes', {}).then((r) => r.changes);
  }

  diff(id: string, options: { paths?: readonly string[] } = {}): Promise<WorkerResult<'diff'>> {
    return this.#withWorker(id, 'diff', options.paths === undefined ? {} : { paths: options.paths });
  }

  commit(id: string, options: { mode?: CommitMode; paths?: readonly string[] } = {}): Promise<CommitResult> {
    return this.#withWorker(id, 'commit', {
      mode: options.mode ?? 'detect-conflicts',
      ...(options.paths === undefined ? {} : { paths: options.paths }),
    });
  }

  async discard(id: string, options: { paths?: readonly string[] } = {}): Promise<void> {
    await this.#withWorker(id, 'discard', options.paths === undefined ? {} : { paths: options.paths });
  }

  /** Reads a file as the sandbox sees it, through its rules (`path` is a codebase path, `/src/a.ts`). */
  async readFile(id: string, path: string): Promise<Buffer> {
    const { data } = await this.#withWorker(id, 'readFile', { path });
    return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  }

  /** Writes a file into the sandbox's delta, through its rules. */
  async writeFile(id: string, path: string, data: Uint8Array | string): Promise<void> {
    await this.#withWorker(id, 'writeFile', {
      path,
      data: typeof data === 'string' ? Buffer.from(data) : data,
    });
  }

  /** Replaces the rules (validated; the error names the rule index); a running sandbox applies them at once. */
  setRules(id: string, policy: { rules?: readonly unknown[]; preset?: string }): Promise<SandboxInfo> {
    validateId('sandbox', id);
    const rules = resolvePolicy({
      preset: policy.preset,
      rules: policy.rules,
      ...(this.#presets === undefined ? {} : { registry: this.#presets }),
    });
    return this.#withLock(id, async () => {
      const row = this.#store.get(id);
      const live = this.#live.get(id);
      if (live === undefined && this.#ownedElsewhere(row)) {
        throw new WrongStateError(`sandbox ${id} is running in control-plane process ${row.owner_pid}`);
      }
      if (live !== undefined) await live.supervisor.setRules(rules);
      this.#store.update(id, { rules: JSON.stringify(rules) });
      this.#logger.info({ sandboxId: id, rules: rules.length }, 'rules replaced');
      return this.get(id);
    });
  }

  // --- Supervision hooks, recovery, reaping, close -------------------------------------------------

  /** Test and diagnostics hook: the live worker's pid, or undefined when this process does not run it. */
  workerPid(id: string): number | undefined {
    return this.#live.get(id)?.supervisor.pid;
  }

  /**
   * Recovers sandboxes whose owning control-plane process is gone: kills their leftover worker, clears
   * their FUSE mount and shared bind, and marks them STOPPED (the delta is kept). Sandboxes owned by a
   * live process are never touched. Returns the ids recovered.
   */
  async recover(): Promise<string[]> {
    const recovered: string[] = [];
    const oneShot: string[] = [];
    for (const row of this.#store.all()) {
      if (row.owner_pid === null || this.#isMine(row) || this.#ownedElsewhere(row)) continue;
      await this.#withLock(row.id, async () => {
        // Claiming is atomic across processes: of several processes opening at once, one recovers it.
        const fresh = this.#store.find(row.id);
        if (fresh === undefined || fresh.owner_pid === null || this.#ownedElsewhere(fresh)) return;
        await this.#claim(row.id);
        this.#release(row.id);
        recovered.push(row.id);
        if (isOneShot(fresh.labels)) oneShot.push(row.id);
      }).catch((err: unknown) => {
        if (!(err instanceof WrongStateError))
          this.#logger.error({ err, sandboxId: row.id }, 'recovery failed');
      });
    }
    // `run` would have removed these itself: nobody will ask for them again.
    for (const id of oneShot) {
      await this.destroy(id).catch((err: unknown) =>
        this.#logger.error({ err, sandboxId: id }, 'removing a dead one-shot sandbox failed'),
      );
    }
    return recovered;
  }

  /** Destroys expired sandboxes this process may touch. Returns the ids destroyed. */
  async reap(now = Date.now()): Promise<string[]> {
    const reaped: string[] = [];
    // Destroys that failed are retried, at most once a minute each (a failure records stopped_at).
    const retries = this.#store
      .all()
      .filter(
        (r) =>
          r.state === 'ERROR' &&
          r.state_reason?.startsWith(DESTROY_FAILED) === true &&
          (r.stopped_at ?? 0) <= now - DESTROY_RETRY_MS,
      );
    for (const row of [...this.#store.expired(now), ...retries]) {
      if (this.#ownedElsewhere(row)) continue;
      try {
        await this.destroy(row.id);
        reaped.push(row.id);
        this.#logger.info({ sandboxId: row.id }, 'expired sandbox destroyed');
      } catch (err) {
        if (!(err instanceof NotFoundError)) this.#logger.error({ err, sandboxId: row.id }, 'reaping failed');
      }
    }
    return reaped;
  }

  /** Stops every sandbox this process runs (state STOPPED, deltas kept). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // Operations already under way finish first (a start in flight would otherwise outlive close).
    await Promise.all([...this.#locks.values()]);
    await Promise.all(
      [...this.#live.keys()].map((id) =>
        this.#withLock(id, () => this.#stopLocked(id, 'control plane closed')).catch((err: unknown) =>
          this.#logger.error({ err, sandboxId: id }, 'stopping at close failed'),
        ),
      ),
    );
    await this.#pool.close();
    // Sandboxes created here and never started stay PENDING for whoever starts them next.
    for (const row of this.#store.all()) if (this.#isMine(row)) this.#release(row.id);
  }

  /**
   * Gets ready for a start that is about to come (the one-shot CLI): a worker spawns and `runtime` checks
   * the host in the background, overlapping whatever the caller does before start(). Failures surface in
   * the start itself.
   */
  prewarm(runtime: string = this.#defaultRuntime): void {
    if (this.#closed) return;
    this.#pool.prewarm();
    void this.#runtimes
      .get(runtime)
      .then((r) => r.check())
      .catch((err: unknown) => this.#logger.debug({ err, runtime }, 'runtime check ahead failed'));
  }

  /** Pids of the idle workers spawned ahead of time (memory accounting). */
  get idleWorkerPids(): number[] {
    return this.#pool.idlePids;
  }

  /** Sandboxes this process currently runs. */
  get liveIds(): string[] {
    return [...this.#live.keys()];
  }

  // --- Internals ---------------------------------------------------------------------------------

  #assertOpen(): void {
    if (this.#closed) throw new WrongStateError('the control plane is closed');
  }

  /** Serializes lifecycle operations on one sandbox within this process. */
  #withLock<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(id) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.#locks.set(id, settled);
    void settled.then(() => {
      if (this.#locks.get(id) === settled) this.#locks.delete(id);
    });
    return next;
  }

  #isMine(row: SandboxRow): boolean {
    return (
      row.owner_pid === this.#self.pid &&
      row.owner_start === this.#self.start &&
      row.owner_instance === this.#self.instance
    );
  }

  /** Owned by another live process (which alone may drive it). */
  #ownedElsewhere(row: SandboxRow): boolean {
    return row.owner_pid !== null && !this.#isMine(row) && isSameProcess(row.owner_pid, row.owner_start);
  }

  /**
   * Makes this process the sandbox's owner, atomically across processes. A dead owner's leftovers are
   * cleaned up first; a live other owner is a WrongStateError.
   */
  async #claim(id: string): Promise<SandboxRow> {
    let stale: SandboxRow | undefined;
    this.#store.withRow(id, (row) => {
      if (this.#ownedElsewhere(row)) {
        throw new WrongStateError(`sandbox ${id} is in use by control-plane process ${row.owner_pid}`, {
          details: { id, ownerPid: row.owner_pid },
        });
      }
      if (row.owner_pid !== null && !this.#isMine(row)) stale = row;
      this.#store.update(id, {
        owner_pid: this.#self.pid,
        owner_start: this.#self.start,
        owner_instance: this.#self.instance,
      });
    });
    if (stale !== undefined) await this.#cleanupStale(stale);
    return this.#store.get(id);
  }

  /** Gives up ownership (the sandbox is not running here any more). */
  #release(id: string): void {
    this.#store.update(id, {
      owner_pid: null,
      owner_start: null,
      owner_instance: null,
      worker_pid: null,
      worker_start: null,
    });
  }

  /**
   * Clears what a dead owner left: its worker, the FUSE mount, the shared bind; a RUNNING sandbox becomes
   * STOPPED. Called by #claim only, so the caller already holds the claim (ownership stays with it).
   */
  async #cleanupStale(row: SandboxRow): Promise<void> {
    const paths = this.#layout.sandbox(row.id);
    if (row.worker_pid !== null && isSameProcess(row.worker_pid, row.worker_start)) {
      try {
        process.kill(row.worker_pid, 'SIGKILL');
      } catch (err) {
        this.#logger.debug({ err, pid: row.worker_pid }, 'leftover worker already gone');
      }
    }
    await this.#clearMounts(paths, row.runtime);
    const ownerPid = row.owner_pid ?? 'unknown';
    // A temporary worker on a stopped sandbox also records an owner: only RUNNING and PENDING (a start
    // or a one-shot run under way) change state; STOPPED can be started again, so nothing stays PENDING.
    this.#store.update(row.id, {
      ...(row.state === 'RUNNING' || row.state === 'PENDING'
        ? {
            state: 'STOPPED',
            state_reason: `recovered: control-plane process ${ownerPid} exited while the sandbox was ${row.state}`,
            stopped_at: Date.now(),
          }
        : {}),
      worker_pid: null,
      worker_start: null,
    });
    this.#logger.warn(
      { sandboxId: row.id, ownerPid: row.owner_pid, state: row.state },
      'recovered a sandbox',
    );
  }

  async #stopLocked(id: string, reason: string | null): Promise<void> {
    const row = this.#store.get(id);
    const live = this.#live.get(id);
    if (live === undefined) {
      if (row.state !== 'RUNNING') return;
      if (this.#ownedElsewhere(row)) {
        throw new WrongStateError(`sandbox ${id} is running in control-plane process ${row.owner_pid}`, {
          details: { id, ownerPid: row.owner_pid },
        });
      }
      await this.#claim(id); // the owner died: its leftovers are cleared, the sandbox marked STOPPED
      this.#release(id);
      return;
    }
    this.#live.delete(id);
    await this.#onStopping(id).catch((err: unknown) =>
      this.#logger.warn({ err, sandboxId: id }, 'closing sessions failed'),
    );
    await live.instance
      .stop()
      .catch((err: unknown) => this.#logger.warn({ err, sandboxId: id }, 'runtime stop failed'));
    await live.supervisor
      .stop()
      .catch((err: unknown) => this.#logger.warn({ err, sandboxId: id }, 'worker stop failed'));
    await this.#clearMounts(this.#layout.sandbox(id), row.runtime);
    await live.audit.flush();
    const current = this.#store.get(id);
    this.#store.update(id, {
      ...(current.state === 'RUNNING' ? { state: 'STOPPED', state_reason: reason } : {}),
      stopped_at: Date.now(),
    });
    this.#release(id);
    this.#logger.info({ sandboxId: id, reason }, 'sandbox stopped');
  }

  #recordRestart(id: string, reason: string): void {
    const row = this.#store.find(id);
    if (row === undefined) return;
    this.#store.update(id, {
      restart_count: row.restart_count + 1,
      last_restart_at: Date.now(),
      last_restart_reason: reason,
    });
    void this.#onWorkerRestart(id, row.runtime).catch((err: unknown) =>
      this.#logger.warn({ err, sandboxId: id }, 'after-restart hook failed'),
    );
  }

  /** Supervision gave up: tear the sandbox down and record ERROR with the reason. */
  async #onFatal(id: string, reason: string): Promise<void> {
    await this.#withLock(id, async () => {
      const live = this.#live.get(id);
      if (live === undefined) return;
      this.#live.delete(id);
      await this.#onStopping(id).catch((err: unknown) =>
        this.#logger.warn({ err }, 'closing sessions failed'),
      );
      await live.instance.stop().catch((err: unknown) => this.#logger.warn({ err }, 'runtime stop failed'));
      await live.supervisor.stop().catch((err: unknown) => this.#logger.warn({ err }, 'worker stop failed'));
      const runtimeName = this.#store.find(id)?.runtime;
      await this.#clearMounts(this.#layout.sandbox(id), runtimeName).catch((err: unknown) =>
        this.#logger.warn({ err }, 'unmount failed'),
      );
      await live.audit.flush();
      this.#store.update(id, { state: 'ERROR', state_reason: reason, stopped_at: Date.now() });
      this.#release(id);
      this.#logger.error({ sandboxId: id, reason }, 'sandbox in ERROR');
    });
  }

  /**
   * Clears a sandbox's mounts: what its runtime left in the state directory (e.g. docker's relay, which
   * outlives a crashed control plane), the FUSE mount (aborting a hung daemon first), the shared bind.
   */
  /**
   * Clears the mounts in a sandbox directory nobody runs (`agentfense gc`): with `runtimeName` unknown (a
   * directory without a record), every registered runtime clears what it may have left there.
   */
  async clearMountsOf(id: string, runtimeName?: string): Promise<void> {
    const paths = this.#layout.sandbox(validateId('sandbox', id));
    if (runtimeName !== undefined) return this.#clearMounts(paths, runtimeName);
    for (const name of this.#runtimes.names) {
      const runtime = await this.#runtimes.get(name).catch(() => undefined);
      await runtime
        ?.clearLeftovers(paths.state)
        .catch((err: unknown) =>
          this.#logger.warn({ err, runtime: name }, 'clearing runtime leftovers failed'),
        );
    }
    await clearFuseMount(paths.workspace);
    await unmountAll(paths.mnt);
  }

  async #clearMounts(paths: SandboxPaths, runtimeName: string | undefined): Promise<void> {
    if (runtimeName !== undefined && this.#runtimes.names.includes(runtimeName)) {
      const runtime = await this.#runtimes.get(runtimeName);
      await runtime.clearLeftovers(paths.state);
    } else {
      this.#logger.warn({ runtime: runtimeName }, 'runtime not registered: its leftovers are not cleared');
    }
    await clearFuseMount(paths.workspace);
    await unmountAll(paths.mnt);
  }

  #requireLive(id: string): Live {
    validateId('sandbox', id);
    const live = this.#live.get(id);
    if (live !== undefined) return live;
    const row = this.#store.get(id);
    if (this.#ownedElsewhere(row)) {
      throw new WrongStateError(`sandbox ${id} is running in control-plane process ${row.owner_pid}`, {
        details: { id, ownerPid: row.owner_pid },
      });
    }
    if (row.state === 'RUNNING') {
      throw new WrongStateError(
        `sandbox ${id} was RUNNING in control-plane process ${row.owner_pid ?? 'unknown'}, which is gone; start it again`,
        { details: { id, state: row.state } },
      );
    }
    throw new WrongStateError(
      `sandbox ${id} is ${row.state}, not RUNNING${row.state_reason ? ` (${row.state_reason})` : ''}`,
      {
        details: { id, state: row.state },
      },
    );
  }

  /**
   * Calls a worker method: on the live worker of a running sandbox, or, for a sandbox that is not
   * running, on a temporary worker mounted just for this call (so changes, diff, commit and discard work
   * after a stop). The temporary worker holds the sandbox's ownership while it runs.
   */
  async #withWorker<M extends WorkerMethod>(
    id: string,
    method: M,
    params: WorkerParams<M>,
  ): Promise<WorkerResult<M>> {
    validateId('sandbox', id);
    const live = this.#live.get(id);
    if (live !== undefined) return requestWhole((m, p) => live.supervisor.request(m, p), method, params);
    return this.#withLock(id, async () => {
      const again = this.#live.get(id);
      if (again !== undefined) return requestWhole((m, p) => again.supervisor.request(m, p), method, params);
      this.#assertOpen();
      const row = await this.#claim(id);
      if (row.state === 'RUNNING') {
        this.#release(id);
        throw new WrongStateError(`sandbox ${id} is RUNNING but not in this process`);
      }
      const paths = this.#layout.sandbox(id);
      const audit = new AuditWriter(paths.auditLog, (err) =>
        this.#logger.error({ err, sandboxId: id }, 'could not write the audit trail'),
      );
      let worker: WorkerHandle | undefined;
      try {
        for (const dir of [paths.dir, paths.delta, paths.mnt]) await ensurePrivateDir(dir);
        await this.#clearMounts(paths, row.runtime);
        await ensurePrivateDir(paths.workspace);
        worker = await spawnWorker({ logFile: paths.workerLog, name: id });
        worker.client.onEvent('audit', (events) => audit.append(events));
        this.#store.update(id, {
          worker_pid: worker.pid,
          worker_start: processStartTime(worker.pid) ?? null,
        });
        await worker.mount({
          lowerDir: this.#codebases.lowerDir(row.codebase_id),
          deltaDir: paths.delta,
          mountpoint: paths.workspace,
          rules: JSON.parse(row.rules) as PermissionRule[],
          auditAllowed: row.audit_allowed !== 0,
          ...diskQuota(row),
        });
        const client = worker.client;
        return await requestWhole((m, p) => client.request(m, p), method, params);
      } finally {
        if (worker !== undefined) {
          await worker
            .stop()
            .catch((err: unknown) => this.#logger.warn({ err }, 'temporary worker stop failed'));
        }
        await this.#clearMounts(paths, row.runtime).catch((err: unknown) =>
          this.#logger.warn({ err }, 'unmount failed'),
        );
        await audit.flush();
        this.#release(id);
      }
    });
  }
}

/** Calls a worker method and, for answers in parts (changes, diff, commit), fetches the rest. */
async function requestWhole<M extends WorkerMethod>(
  request: <N extends WorkerMethod>(method: N, params: WorkerParams<N>) => Promise<WorkerResult<N>>,
  method: M,
  params: WorkerParams<M>,
): Promise<WorkerResult<M>> {
  const first = await request(method, params);
  if (typeof first !== 'object' || first === null || !('next' in first)) return first;
  return collectParts(first, (cursor) => request('more', { cursor }));
}

/** The delta quota of a stored sandbox (its resources.diskBytes), as MountParams. */
function diskQuota(row: SandboxRow): { diskQuotaBytes?: number } {
  const { diskBytes } = JSON.parse(row.resources) as ResourceLimits;
  return diskBytes === undefined ? {} : { diskQuotaBytes: diskBytes };
}

/** An image is refused by runtimes that take none rather than silently ignored. */
function checkImage(runtime: string, traits: RuntimeTraits, image: unknown): string | null {
  if (image === undefined || image === null) return null;
  if (!traits.acceptsImage) {
    throw new InvalidArgumentError(
      `image applies to runtimes that run images, like docker (this sandbox uses ${runtime})`,
    );
  }
  if (typeof image !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$/.test(image)) {
    throw new InvalidArgumentError(
      `image must be an image reference like agentfense/base:latest, got ${JSON.stringify(image)}`,
    );
  }
  return image;
}

function checkLabels(labels: unknown): Record<string, string> {
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
    throw new InvalidArgumentError('labels must be an object of string keys and string values');
  }
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) {
    if (key === '' || key.length > MAX_LABEL_KEY || key.includes('\0')) {
      throw new InvalidArgumentError(
        `label key ${JSON.stringify(key)} must be 1..${MAX_LABEL_KEY} characters`,
      );
    }
    if (typeof value !== 'string' || value.length > MAX_LABEL_VALUE || value.includes('\0')) {
      throw new InvalidArgumentError(
        `label ${key} must have a string value of at most ${MAX_LABEL_VALUE} characters`,
      );
    }
    out[key] = value;
  }
  return out;
}

function checkResources(resources: unknown): Record<string, number> {
  if (resources === null || typeof resources !== 'object' || Array.isArray(resources)) {
    throw new InvalidArgumentError('resources must be an object');
  }
  const allowed = new Set(['memoryBytes', 'cpuQuota', 'cpuShares', 'pidsLimit', 'diskBytes', 'tmpBytes']);
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(resources)) {
    if (!allowed.has(key)) throw new InvalidArgumentError(`unknown resource limit ${JSON.stringify(key)}`);
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
      throw new InvalidArgumentError(`resources.${key} must be a positive integer`);
    }
    out[key] = value;
  }
  return out;
}
