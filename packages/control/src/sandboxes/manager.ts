// Sandbox lifecycle (contract §6): create, start, stop, destroy, exec and the delta operations, with
// ownership across processes. Several control-plane processes may share one data directory: each running
// sandbox records its owner (pid + kernel start time); a process only ever drives sandboxes it owns, and a
// sandbox whose owner has died is recovered (mounts cleared, worker killed, marked STOPPED, delta kept).
import type { Logger } from 'pino';
import type { NetworkAuditEvent } from '@agentfense/network';
import { DEFAULT_RESOURCES, WrongStateError, toAgentFenseError } from '@agentfense/protocol';
import type {
  AuditEvent,
  CommitMode,
  CommitResult,
  ChangeEntry,
  ExecResult,
  RuntimeInstance,
  WorkerMethod,
  WorkerParams,
  WorkerResult,
  WorkerStats,
} from '@agentfense/protocol';
import { validateId } from '../ids.js';
import { ensurePrivateDir, type DataLayout } from '../paths.js';
import { sandboxInfo, type SandboxStore } from '../store/sandboxes.js';
import { readAudit } from '@agentfense/audit-trail';
import type { AuditQuery, AuditWriter, NetworkAuditQuery } from '@agentfense/audit-trail';
import type { AuditRecords } from '../placement/backend.js';
import { removeSandboxFiles } from './destroy-files.js';
import { KeyedLock } from './keyed-lock.js';
import { networkOptions } from './network.js';
import { PolicyChanges } from './policy-changes.js';
import { SandboxMounts } from './mounts.js';
import { Ownership } from './ownership.js';
import { keepForUser } from './pending-commit.js';
import { DESTROY_FAILED, reapSandboxes, recoverSandboxes, type RecoveryDeps } from './recovery.js';
import type { RuntimeRegistry } from './runtimes.js';
import { whenWorkerReady } from './ready-instance.js';
import { keepLiveAlive, partsOf, startSandbox, type Live, type StartDeps } from './start.js';
import { prewarm, type PrewarmKind } from './prewarm.js';
import { assertTransition } from './state.js';
import { retireSandbox, type Retiring } from './retire.js';
import { tearDown } from './teardown.js';
import type { SandboxManagerOptions } from './manager-options.js';
import { onWorker } from './temporary-worker.js';
import { checkResources } from './validate.js';
import { listSandboxes, newSandboxRow, type CreateInternal, type RecordDeps } from './records.js';
import { SecretVault, maskedExec, redact, type WithSecrets } from './secrets.js';
import { DEFAULT_WORKER_POOL_SIZE, WorkerPool } from '@agentfense/fuse-worker';
import { SandboxTrash } from './trash.js';
import type {
  CreateSandboxOptions,
  ListSandboxesOptions,
  Page,
  SandboxExecOptions,
  SandboxInfo,
} from './types.js';

export type { SandboxManagerOptions } from './manager-options.js';

export class SandboxManager {
  readonly #layout: DataLayout;
  readonly #store: SandboxStore;
  readonly #runtimes: RuntimeRegistry;
  readonly #logger: Logger;
  readonly #onWorkerRestart: (id: string, runtime: string) => Promise<void>;
  readonly #mounts: SandboxMounts;
  readonly #owner: Ownership;
  /** What starting and tearing down need (the parts of this manager they use). */
  readonly #deps: StartDeps;
  readonly #recovery: RecoveryDeps;
  readonly #records: RecordDeps;
  readonly #live = new Map<string, Live>();
  readonly #locks = new KeyedLock();
  readonly #pool: WorkerPool;
  /** Rules, network policy and secret values replaced (policy-changes.ts). */
  readonly policies: PolicyChanges;
  /** Where destroy puts a sandbox's directory to be removed in the background (gc empties it too). */
  readonly trash: SandboxTrash;
  #lastCreatedAt = 0;
  #closed = false;

  constructor(options: SandboxManagerOptions) {
    this.#layout = options.layout;
    this.#store = options.store;
    this.#runtimes = options.runtimes;
    this.#logger = options.logger.child({ component: 'sandboxes' });
    this.#onWorkerRestart = options.onWorkerRestart ?? (() => Promise.resolve());
    this.#pool = new WorkerPool({
      size: options.workerPoolSize ?? DEFAULT_WORKER_POOL_SIZE,
      logFile: options.layout.workerPoolLog,
      logger: this.#logger.child({ component: 'worker-pool' }),
    });
    this.#mounts = new SandboxMounts({ runtimes: this.#runtimes, logger: this.#logger });
    this.trash = new SandboxTrash({ layout: this.#layout, logger: this.#logger });
    this.#owner = new Ownership({
      layout: this.#layout,
      store: this.#store,
      mounts: this.#mounts,
      logger: this.#logger,
    });
    this.#deps = {
      layout: this.#layout,
      store: this.#store,
      mounts: this.#mounts,
      logger: this.#logger,
      onStopping: options.onStopping ?? (() => Promise.resolve()),
      onLayers: options.onLayers ?? (() => Promise.resolve()),
      frozenBytes: options.frozenBytes ?? (() => Promise.resolve(0)),
      codebases: options.codebases,
      runtimes: this.#runtimes,
      pool: this.#pool,
      supervision: options.supervision,
      network: networkOptions(options.network),
      workerMemory: options.workerMemory,
      hostUsers: options.hostUsers,
      secrets: new SecretVault(),
    };
    this.#records = {
      ...this.#deps, // codebases, runtimes and the secrets' vault
      presets: options.presets,
      defaultRuntime: options.defaultRuntime ?? 'bwrap',
      defaultResources: checkResources({ ...DEFAULT_RESOURCES, ...options.defaultResources }),
    };
    this.#recovery = {
      store: this.#store,
      owner: this.#owner,
      locks: this.#locks,
      logger: this.#logger,
      layout: this.#layout,
      destroy: (id) => this.destroy(id),
      commit: (id, commit) => this.commit(id, commit),
      unfinishedCommits: options.unfinishedCommits ?? 'keep',
    };
    // The recovery's store, ownership, locks, logger and layout are the policy changes' too.
    this.policies = new PolicyChanges({
      ...this.#recovery,
      secrets: this.#deps.secrets,
      live: this.#live,
      presets: options.presets,
      info: (id) => this.get(id),
      placed: options.placed,
    });
  }

  /** Creates a sandbox in PENDING; rules, runtime, labels, env and expiry are validated now. */
  async create(options: CreateSandboxOptions, internal: CreateInternal = {}): Promise<SandboxInfo> {
    this.#assertOpen();
    // Strictly increasing within this process: listings are in creation order (created_at, then id).
    const now = Math.max(Date.now(), this.#lastCreatedAt + 1);
    const row = await newSandboxRow(this.#records, options, now, internal);
    this.#lastCreatedAt = now;
    const { id } = row;
    // The record first, then the directory: `agentfense gc` removes directories without a record.
    // A caller that starts it at once (the one-shot CLI, the API's `start: true`) owns it from birth, in
    // the same statement: if the process dies before the start, recovery sees a dead owner and settles
    // the sandbox instead of leaving it PENDING (an owner written after the directories were made left a
    // window where a kill did: test/security/serve-crash.test.ts).
    await this.#store.insert(internal.own === true ? { ...row, ...this.#owner.columns } : row);
    await ensurePrivateDir(this.#layout.sandboxesDir);
    await ensurePrivateDir(this.#layout.sandbox(id).dir);
    this.#logger.info(
      { sandboxId: id, codebaseId: row.codebase_id, runtime: row.runtime },
      'sandbox created',
    );
    return this.get(id);
  }

  async get(id: string): Promise<SandboxInfo> {
    return sandboxInfo(await this.#store.get(validateId('sandbox', id)));
  }

  /** Filtered listing in creation order, one page at a time. */
  list(options: ListSandboxesOptions = {}): Promise<Page<SandboxInfo>> {
    return listSandboxes(this.#store, options);
  }

  /** The file decisions (denials; allowed accesses if asked for), or the network's with `kind: 'network'`. */
  async audit(id: string, query?: AuditQuery): Promise<AuditEvent[]>;
  async audit(id: string, query: NetworkAuditQuery): Promise<NetworkAuditEvent[]>;
  async audit(id: string, query: AuditQuery | NetworkAuditQuery = {}): Promise<AuditRecords> {
    await this.#store.get(validateId('sandbox', id));
    const live = this.#live.get(id);
    // The worker and the policy point batch their records: a stats request to the worker and a flush of
    // the policy point have them send what they hold, so a query right after a command sees its records.
    await live?.supervisor.request('stats', {}).catch(() => undefined);
    await live?.network?.flush();
    await live?.audit.flush();
    return redact(await readAudit(this.#layout.sandbox(id).auditLog, query), this.#deps.secrets.get(id));
  }

  // --- Lifecycle ---------------------------------------------------------------------------------

  /**
   * Starts the sandbox: directories, the shared bind mount, the worker and its mount, then the runtime.
   * On failure everything started is undone, the sandbox goes to ERROR with the reason, and the error
   * is thrown. Starting a sandbox this process already runs returns it unchanged.
   */
  start(id: string): Promise<SandboxInfo> {
    validateId('sandbox', id);
    return this.#locks.run(id, async () => {
      this.#assertOpen();
      if (this.#live.has(id)) return this.get(id);
      const row = await this.#owner.claim(id);
      try {
        assertTransition(id, row.state, 'RUNNING');
      } catch (err) {
        await this.#owner.release(id);
        throw err;
      }
      const live = await startSandbox(this.#deps, row, {
        onRestart: (reason) => void this.#recordRestart(id, reason),
        onFatal: (reason) => void this.#onFatal(id, reason),
      });
      this.#live.set(id, live);
      return this.get(id);
    });
  }

  /** Stops a running sandbox: runtime, worker, mounts; the delta stays. Idempotent on a stopped one. */
  stop(id: string, options: { reason?: string } = {}): Promise<SandboxInfo> {
    validateId('sandbox', id);
    return this.#locks.run(id, async () => {
      await this.#stopLocked(id, options.reason ?? null);
      return this.get(id);
    });
  }

  /** Destroys a sandbox in any state: stop, forget, remove files (`keepDelta` keeps the delta; trash.ts). */
  destroy(id: string, options: { keepDelta?: boolean } = {}): Promise<void> {
    validateId('sandbox', id);
    return this.#locks.run(id, async () => {
      if (this.#live.has(id)) await this.#stopLocked(id, 'destroyed');
      // Claiming refuses a sandbox another live process runs, clears a dead owner's leftovers, and keeps
      // any other process from starting it while it is being removed.
      const claimed = await this.#owner.claim(id);
      const paths = this.#layout.sandbox(id);
      // The record goes last: a destroy that fails half-way leaves the sandbox listed in ERROR with what is
      // left of its files (never files nobody knows about), and destroying it again, the reaper or gc retry.
      try {
        await this.#mounts.clear(paths, claimed.runtime);
        await removeSandboxFiles({ paths, id, trash: this.trash, users: this.#deps.hostUsers, ...options });
      } catch (err) {
        const error = toAgentFenseError(err, `destroying sandbox ${id}`);
        await this.#store.update(id, {
          state: 'ERROR',
          state_reason: `${DESTROY_FAILED}${error.message} (its files are kept; destroy it again to retry)`,
          stopped_at: Date.now(),
        });
        await this.#owner.release(id);
        this.#logger.error({ sandboxId: id, err: error }, 'sandbox destroy failed');
        throw error;
      }
      await this.#store.delete(id);
      this.#deps.secrets.delete(id);
      this.#logger.info({ sandboxId: id, keepDelta: options.keepDelta === true }, 'sandbox destroyed');
    });
  }

  /** Keeps a sandbox for its user (its commit did not finish): stopped, with `reason`, no longer one-shot. */
  keepForUser(id: string, reason: string): Promise<void> {
    validateId('sandbox', id);
    return this.#locks.run(id, async () => {
      if (this.#live.has(id)) await this.#stopLocked(id, reason);
      await keepForUser(this.#store, id, reason);
    });
  }

  /** Removes a running sandbox of this process, its record first (retire.ts: the run helper's answer). */
  retire(id: string): Retiring {
    const d = {
      locks: this.#locks,
      store: this.#store,
      live: this.#live,
      owner: this.#owner,
      deps: this.#deps,
    };
    return retireSandbox(d, validateId('sandbox', id));
  }

  // --- Commands and the delta ---------------------------------------------------------------------

  /** Runs one command in a RUNNING sandbox of this process (waits for a worker restart in progress). */
  async exec(
    id: string,
    command: string | readonly string[],
    options: SandboxExecOptions = {},
  ): Promise<ExecResult> {
    const live = await this.#requireLive(id);
    await live.supervisor.worker();
    return maskedExec((o) => live.instance.exec(o), { ...options, command }, this.#deps.secrets.get(id));
  }

  /** The worker's resource and activity report (running sandboxes of this process). */
  async workerStats(id: string): Promise<WorkerStats> {
    return (await this.#requireLive(id)).supervisor.request('stats', {});
  }

  /** Whether a running sandbox of this process keeps it alive (yes by default; an idle spare need not). */
  keepProcessAlive(id: string, keep: boolean): void {
    keepLiveAlive(this.#liveNow(id), keep);
  }

  /** The runtime instance of a running sandbox (sessions spawn their shells through it). */
  runtimeInstance(id: string): RuntimeInstance {
    return this.#liveNow(id).instance;
  }

  /** Runs `start` (a session's shell) on the instance once any worker restart is over (ready-instance.ts). */
  async withReadyInstance<T>(id: string, start: WithSecrets<T>): Promise<T> {
    const live = await this.#requireLive(id);
    return whenWorkerReady(live.supervisor, () => start(live.instance, () => this.#deps.secrets.get(id)));
  }

  changes(id: string): Promise<readonly ChangeEntry[]> {
    return this.onDelta(id, 'changes', {}).then((r) => r.changes);
  }

  diff(id: string, options: { paths?: readonly string[] } = {}): Promise<WorkerResult<'diff'>> {
    return this.onDelta(id, 'diff', options.paths === undefined ? {} : { paths: options.paths });
  }

  commit(id: string, options: { mode?: CommitMode; paths?: readonly string[] } = {}): Promise<CommitResult> {
    const { mode = 'detect-conflicts', paths } = options;
    return this.onDelta(id, 'commit', paths === undefined ? { mode } : { mode, paths });
  }

  async discard(id: string, options: { paths?: readonly string[] } = {}): Promise<void> {
    await this.onDelta(id, 'discard', options.paths === undefined ? {} : { paths: options.paths });
  }

  /** A worker method on the sandbox's delta: its live worker's, or a temporary one's (temporary-worker.ts). */
  onDelta<M extends WorkerMethod>(id: string, method: M, params: WorkerParams<M>): Promise<WorkerResult<M>> {
    const deps = { ...this.#deps, live: this.#live, locks: this.#locks, owner: this.#owner };
    const calls = { ...deps, assertOpen: () => this.#assertOpen() };
    return onWorker(calls, validateId('sandbox', id), method, params);
  }

  /** The audit trail writer of a sandbox running in this process. */
  liveAudit(id: string): AuditWriter | undefined {
    return this.#live.get(id)?.audit;
  }

  /** Reads a file as the sandbox sees it, through its rules (`path` is a codebase path, `/src/a.ts`). */
  async readFile(id: string, path: string): Promise<Buffer> {
    const { data } = await this.onDelta(id, 'readFile', { path });
    return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  }

  /** Writes a file into the sandbox's delta, through its rules. */
  async writeFile(id: string, path: string, data: Uint8Array | string): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    await this.onDelta(id, 'writeFile', { path, data: bytes });
  }

  /** Charges the sandbox's frozen layers to its quota: in its live worker now, and in every restart's. */
  setFrozenBytes(id: string, bytes: number): Promise<void> {
    return this.#live.get(id)?.supervisor.setFrozenBytes(bytes) ?? Promise.resolve();
  }

  // --- Supervision hooks, recovery, reaping, close -------------------------------------------------

  /** Test and diagnostics hook: the live worker's pid, or undefined when this process does not run it. */
  workerPid(id: string): number | undefined {
    return this.#live.get(id)?.supervisor.pid;
  }

  /** Recovers sandboxes of dead owners (STOPPED, deltas kept; one-shot ones destroyed); returns the ids. */
  recover(): Promise<string[]> {
    this.trash.sweep(); // what a dead process left half-removed
    return recoverSandboxes(this.#recovery);
  }

  /** Destroys expired sandboxes (and retries failed destroys) this process may touch. Returns the ids. */
  reap(now = Date.now()): Promise<string[]> {
    return reapSandboxes(this.#recovery, now);
  }

  /** Stops every sandbox this process runs (state STOPPED, deltas kept). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // Operations already under way finish first (a start in flight would otherwise outlive close).
    await this.#locks.idle();
    await Promise.all(
      [...this.#live.keys()].map((id) =>
        this.#locks
          .run(id, () => this.#stopLocked(id, 'control plane closed'))
          .catch((err: unknown) => this.#logger.error({ err, sandboxId: id }, 'stopping at close failed')),
      ),
    );
    await this.#pool.close();
    await this.trash.idle();
    // Sandboxes created here and never started stay PENDING for whoever starts them next.
    for (const row of await this.#store.all()) if (this.#owner.isMine(row)) await this.#owner.release(row.id);
  }

  /**
   * Gets ready for a start about to come (the one-shot CLI, the library's first call) in the background,
   * overlapping what the caller does before start() (prewarm.ts). Failures surface in the start.
   */
  prewarm(kind: PrewarmKind = this.#records.defaultRuntime): void {
    if (this.#closed) return;
    prewarm({ ...this.#records, pool: this.#pool, logger: this.#logger }, kind);
  }

  /** Pids of the idle workers spawned ahead of time (memory accounting). */
  get idleWorkerPids(): number[] {
    return this.#pool.idlePids;
  }

  /** Sandboxes this process currently runs. */
  get liveIds(): string[] {
    return [...this.#live.keys()];
  }

  /** Clears the mounts in a sandbox directory nobody runs (`gc`); no runtimeName: every runtime's. */
  async clearMountsOf(id: string, runtimeName?: string): Promise<void> {
    const paths = this.#layout.sandbox(validateId('sandbox', id));
    if (runtimeName !== undefined) return this.#mounts.clear(paths, runtimeName);
    return this.#mounts.clearUnknown(paths);
  }

  // --- Internals ---------------------------------------------------------------------------------

  #assertOpen(): void {
    if (this.#closed) throw new WrongStateError('the control plane is closed');
  }

  /** Stop under the sandbox's lock: a live sandbox is torn down to STOPPED; a dead owner's is recovered. */
  async #stopLocked(id: string, reason: string | null): Promise<void> {
    const row = await this.#store.get(id);
    const live = this.#live.get(id);
    if (live === undefined) {
      if (row.state !== 'RUNNING') return;
      if (this.#owner.ownedElsewhere(row)) throw this.#owner.runningElsewhere(row);
      await this.#owner.claim(id); // the owner died: its leftovers are cleared, the sandbox marked STOPPED
      await this.#owner.release(id);
      return;
    }
    this.#live.delete(id);
    await tearDown(this.#deps, {
      id,
      parts: partsOf(live),
      runtimeName: row.runtime,
      closeSessions: true,
      mountErrors: 'throw',
      settle: (current) => ({
        ...(current.state === 'RUNNING' ? { state: 'STOPPED', state_reason: reason } : {}),
        stopped_at: Date.now(),
      }),
    });
    this.#logger.info({ sandboxId: id, reason }, 'sandbox stopped');
  }

  async #recordRestart(id: string, reason: string): Promise<void> {
    try {
      const row = await this.#store.find(id);
      if (row === undefined) return;
      await this.#store.update(id, {
        restart_count: row.restart_count + 1,
        last_restart_at: Date.now(),
        last_restart_reason: reason,
      });
      await this.#onWorkerRestart(id, row.runtime);
    } catch (err) {
      this.#logger.warn({ err, sandboxId: id }, 'after-restart hook failed');
    }
  }

  /** Supervision gave up: tear the sandbox down and record ERROR with the reason. */
  async #onFatal(id: string, reason: string): Promise<void> {
    await this.#locks.run(id, async () => {
      const live = this.#live.get(id);
      if (live === undefined) return;
      this.#live.delete(id);
      await tearDown(this.#deps, {
        id,
        parts: partsOf(live),
        runtimeName: (await this.#store.find(id))?.runtime,
        closeSessions: true,
        mountErrors: 'log',
        settle: () => ({ state: 'ERROR', state_reason: reason, stopped_at: Date.now() }),
      });
      this.#logger.error({ sandboxId: id, reason }, 'sandbox in ERROR');
    });
  }

  async #requireLive(id: string): Promise<Live> {
    validateId('sandbox', id);
    const live = this.#live.get(id);
    if (live !== undefined) return live;
    throw this.#owner.notRunningHere(await this.#store.get(id));
  }

  /** #requireLive without reading the record (synchronous callers: diagnostics, the spare). */
  #liveNow(id: string): Live {
    const live = this.#live.get(validateId('sandbox', id));
    if (live === undefined) throw new WrongStateError(`sandbox ${id} is not running in this process`);
    return live;
  }
}
