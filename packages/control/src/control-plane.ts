// The lower-level client (contract §7): one ControlPlane per data directory and process, owning the database,
// the logger, the codebase store and the sandboxes it runs. The CLI and the HTTP server are built on it.
// Its options are in control-plane-options.ts.
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type {
  AuditEvent,
  ChangeEntry,
  CommitMode,
  CommitResult,
  ExecResult,
  RuntimeInstance,
  WorkerStats,
} from '@agentfense/protocol';
import type { NetworkAuditEvent, NetworkPolicyInput } from '@agentfense/network';
import { CodebaseService } from './codebases/service.js';
import { DiskGuard } from './disk/guard.js';
import type { UploadOptions, UploadSource } from './codebases/service.js';
import { DEFAULT_DOCKER_POOL_SIZE, checkWorkerPoolSize } from './control-plane-options.js';
import type { ControlPlaneOptions } from './control-plane-options.js';
import type { CodebaseInfo, CodebaseVisibility, FileEntry } from './codebases/types.js';
import { validateId } from './ids.js';
import { createControlLogger } from './logger.js';
import { DataLayout, ensurePrivateDir, resolveDataDir } from './paths.js';
import type { AuditQuery, NetworkAuditQuery } from '@agentfense/audit-trail';
import { collectGarbage, type GcOptions, type GcReport } from './sandboxes/gc.js';
import { SandboxHostUsers } from './sandboxes/host-user.js';
import { checkpointService } from './sandboxes/checkpoint-host.js';
import { checkpointLimits } from './sandboxes/checkpoint-limits.js';
import type { CheckpointService } from './sandboxes/checkpoints.js';
import type {
  CheckpointInfo,
  CheckpointOptions,
  ForkOptions,
  RestoreOptions,
} from './sandboxes/checkpoints.js';
import { SandboxManager } from './sandboxes/manager.js';
import type { ControlPlaneParts } from './control-plane-parts.js';
import type { SandboxBackend } from './placement/backend.js';
import { OrchestratedSandboxes } from './placement/orchestrated.js';
import { startReaper } from './sandboxes/reaper-timer.js';
import { SPARE_LABEL } from './sandboxes/one-shot.js';
import type { CreateInternal } from './sandboxes/records.js';
import type { SecretValueSource } from './sandboxes/secret-values.js';
import { RuntimeRegistry, builtinRuntimes } from './sandboxes/runtimes.js';
import type {
  CreateSandboxOptions,
  ListSandboxesOptions,
  Page,
  SandboxExecOptions,
  SandboxInfo,
} from './sandboxes/types.js';
import { openMetadataStore } from './store/metadata.js';
import type { MetadataStore } from './store/metadata.js';
import type { SandboxStore } from './store/sandboxes.js';
import { settleUnfinished } from './sandboxes/pending-commit.js';
import { SessionManager } from './sessions/manager.js';
import type { CreateSessionOptions } from '@agentfense/sessions';
import type { Session } from '@agentfense/sessions';
import { decodeOutput, splitEncoding } from '@agentfense/sessions';
import type { BytesOutput, OutputEncoding, RunResult, TextOutput } from '@agentfense/sessions';

/** Default period of the expired-sandbox reaper. */
export const DEFAULT_REAP_INTERVAL_MS = 10_000;

/** The control plane of one data directory, as used by a process. Open with `ControlPlane.open()`. */
export class ControlPlane implements AsyncDisposable {
  readonly dataDir: string;
  readonly layout: DataLayout;
  readonly logger: Logger;
  // The flat methods below are the API; these parts are what they delegate to. Kept public, deprecated,
  // for code written against the earlier two-way surface (docs/decisions.md "One library shape: strings
  // by default, bytes on request").
  /** @deprecated Use the flat codebase methods (`createCodebase`, `linkCodebase`, `listFiles`, …). */
  readonly codebases: CodebaseService;
  /** @deprecated Use the flat sandbox methods (`createSandbox`, `startSandbox`, `run`, `diff`, …). */
  readonly sandboxes: SandboxManager;
  /** @deprecated Use the flat session methods (`createSession`, `getSession`, `listSessions`, `closeSession`). */
  readonly sessions: SessionManager;
  readonly #metadata: MetadataStore;
  readonly #store: SandboxStore;
  readonly #reaper: NodeJS.Timeout | undefined;
  readonly #runtimes: RuntimeRegistry;
  /** Failures for lack of room said as such, and room kept for the operations that free it. */
  readonly #disk: DiskGuard;
  readonly #hostUsers: SandboxHostUsers;
  readonly #checkpoints: CheckpointService;
  /** Where sandboxes run: this process (the manager) or cluster nodes (placement/). */
  readonly #backend: SandboxBackend;
  readonly #placed: OrchestratedSandboxes | undefined;
  #closing: Promise<void> | undefined;

  private constructor(parts: ControlPlaneParts) {
    this.#checkpoints = parts.checkpoints;
    this.#placed = parts.placed;
    this.#backend = parts.placed ?? parts.sandboxes;
    this.#runtimes = parts.runtimes;
    this.#disk = parts.disk;
    this.#hostUsers = parts.hostUsers;
    this.dataDir = parts.dataDir;
    this.layout = parts.layout;
    this.logger = parts.logger;
    this.#metadata = parts.metadata;
    this.#store = parts.store;
    this.codebases = parts.codebases;
    this.sandboxes = parts.sandboxes;
    this.sessions = parts.sessions;
    this.#reaper = startReaper({
      sandboxes: this.sandboxes,
      logger: this.logger,
      intervalMs: parts.reapIntervalMs,
      recover: parts.metadata.backend === 'postgres',
    });
  }

  /**
   * Opens (creating if needed) the data directory and its database, then recovers sandboxes left
   * RUNNING by control-plane processes that are gone (their mounts cleared, deltas kept).
   */
  static async open(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
    checkWorkerPoolSize(options.workerPoolSize);
    const limits = checkpointLimits(options.checkpoints); // a wrong setting fails before anything opens
    const dataDir = resolveDataDir({ dataDir: options.dataDir });
    const layout = new DataLayout(dataDir);
    for (const dir of [layout.root, layout.logsDir, layout.codebasesDir, layout.sandboxesDir]) {
      await ensurePrivateDir(dir);
    }
    const logger =
      options.logger ?? createControlLogger({ file: layout.controlLog, level: options.logLevel });
    const disk = new DiskGuard({ layout, logger });
    const metadata = await disk.writing('opening its database', () =>
      openMetadataStore({ sqliteFile: layout.database, database: options.database }),
    );
    const store = metadata.sandboxes;
    const codebases = new CodebaseService({
      store: metadata.codebases,
      layout,
      sandboxes: store,
      logger,
      ...(options.maxUploadBytes === undefined ? {} : { maxUploadBytes: options.maxUploadBytes }),
    });
    // Each sandbox's own host uid, leased host-wide (docker's pool leases its idle containers' through it).
    const hostUsers = new SandboxHostUsers({ logger: logger.child({ component: 'host-users' }) });
    const runtimes = new RuntimeRegistry({
      ...builtinRuntimes({
        dataDir,
        logger,
        hostUsers,
        dockerPoolSize:
          options.dockerPoolSize ?? (options.workerPoolSize === 0 ? 0 : DEFAULT_DOCKER_POOL_SIZE),
      }),
      ...options.runtimes,
    });
    const sessions = new SessionManager({ logger: logger.child({ component: 'sessions' }) });
    const { placement } = options;
    const placed = placement && new OrchestratedSandboxes({ metadata, codebases, layout, logger, placement });
    const sandboxes = new SandboxManager({
      layout,
      store,
      codebases,
      runtimes,
      hostUsers,
      logger,
      placed,
      presets: options.presets,
      supervision: options.supervision,
      network: options.network,
      defaultRuntime: options.defaultRuntime,
      workerPoolSize: options.workerPoolSize,
      defaultResources: options.defaultResources,
      workerMemory: options.workerMemory,
      unfinishedCommits: options.unfinishedCommits,
      onStopping: (id) => sessions.closeSandbox(id),
      // The checkpoint records, settled from every mount's report (made below: it calls the manager).
      onLayers: (id, frozen) => checkpoints.settle(id, frozen),
      frozenBytes: (id) => checkpoints.frozenBytes(id),
      // Runtimes whose shells see the remount (bwrap's anchor, docker's relay) keep their sessions, each
      // shell re-entering its cwd; other shells hold the dead mount and are closed, saying why.
      onWorkerRestart: async (id, runtime) => {
        if ((await runtimes.get(runtime)).traits.sessionsSurviveWorkerRestart)
          sessions.workspaceRemounted(id);
        else await sessions.closeSandbox(id, 'worker-restarted');
      },
    });
    const cps = { metadata, layout, sandboxes, logger, limits, compactionFault: options.compactionFault };
    const checkpoints = checkpointService({ ...cps, plane: () => plane });
    const plane: ControlPlane = new ControlPlane({
      placed,
      checkpoints,
      dataDir,
      layout,
      logger,
      metadata,
      store,
      codebases,
      sandboxes,
      sessions,
      reapIntervalMs: options.reapIntervalMs ?? DEFAULT_REAP_INTERVAL_MS,
      runtimes,
      disk,
      hostUsers,
    });
    if (options.prewarm !== undefined) sandboxes.prewarm(options.prewarm);
    const recovered = await sandboxes.recover();
    // Compactions and layer removals a crash cut short (pending checkpoints' layers are kept).
    await checkpoints.recover();
    await disk.reserve.replenish();
    logger.info({ dataDir, recovered }, 'control plane open');
    return plane;
  }

  // --- Codebases ---

  createCodebase(options: { name: string; ownerId?: string | null }): Promise<CodebaseInfo> {
    return this.#disk.writing('creating a codebase', () => this.codebases.create(options));
  }
  /**
   * A host directory used in place as the codebase (nothing copied). Local: the HTTP, gRPC and /mcp faces
   * answer "not found" for it and its sandboxes, unless `apiVisible: true` (docs/security.md).
   */
  linkCodebase(options: {
    path: string;
    name?: string;
    ownerId?: string | null;
    apiVisible?: boolean;
  }): Promise<CodebaseInfo> {
    return this.#disk.writing('linking a codebase', () => this.codebases.link(options));
  }
  getCodebase(id: string): Promise<CodebaseInfo> {
    return this.codebases.get(id);
  }
  /** Who may reach codebase `id`: API clients too ('api'), or only local processes ('local'). */
  codebaseVisibility(id: string): Promise<CodebaseVisibility> {
    return this.codebases.visibility(id);
  }
  /** All codebases but those linked for the run helper's idle spare (internal, like the spare itself). */
  async listCodebases(): Promise<CodebaseInfo[]> {
    const internal = new Set(await this.#store.codebasesWithLabel(SPARE_LABEL));
    return (await this.codebases.list()).filter((c) => !internal.has(c.id));
  }
  uploadFile(id: string, path: string, source: UploadSource, options?: UploadOptions): Promise<FileEntry> {
    return this.#disk.writing(`uploading ${path}`, () => this.codebases.upload(id, path, source, options));
  }
  listFiles(id: string, options?: { path?: string; recursive?: boolean }): Promise<FileEntry[]> {
    return this.codebases.listFiles(id, options);
  }
  downloadFile(id: string, path: string): Promise<{ stream: Readable; size: number }> {
    return this.codebases.download(id, path);
  }
  deleteCodebase(id: string): Promise<void> {
    return this.#disk.freeing('deleting a codebase', () => this.codebases.delete(id));
  }

  // --- Sandboxes ---

  /**
   * `own`: this process owns the sandbox from its INSERT (a server or one-shot run that starts it at
   * once): if the process dies before the start, recovery settles it instead of leaving it PENDING.
   * `spare`: the run helper's spare sandbox (reserved label, left out of listings; claimSpareSandbox).
   */
  createSandbox(options: CreateSandboxOptions, ownership: CreateInternal = {}): Promise<SandboxInfo> {
    return this.#disk.writing('creating a sandbox', () => this.sandboxes.create(options, ownership));
  }
  /**
   * The run helper hands its spare sandbox (created with `spare: true`) to a run: the reserved label goes
   * from the record and from the label index in one transaction, so from then on the sandbox is listed and
   * labelled as any run's. False when it was not a spare (nothing changed).
   */
  claimSpareSandbox(id: string): Promise<boolean> {
    return this.#store.removeLabel(validateId('sandbox', id), SPARE_LABEL);
  }
  getSandbox(id: string): Promise<SandboxInfo> {
    return this.sandboxes.get(id);
  }
  listSandboxes(options?: ListSandboxesOptions): Promise<Page<SandboxInfo>> {
    return this.sandboxes.list(options);
  }
  startSandbox(id: string): Promise<SandboxInfo> {
    return this.#disk.writing('starting a sandbox', () => this.#backend.start(id));
  }
  stopSandbox(id: string, options?: { reason?: string }): Promise<SandboxInfo> {
    return this.#disk.writing('stopping a sandbox', () => this.#backend.stop(id, options));
  }
  async destroySandbox(id: string, options?: { keepDelta?: boolean }): Promise<void> {
    await this.#disk.freeing('destroying a sandbox', () => this.#backend.destroy(id, options));
    // Its checkpoints went with its record: their layers go unless a fork's stack holds them.
    await this.#checkpoints.collect();
  }
  /** Freezes the sandbox's files as they are now (nothing copied); docs/checkpoints.md. */
  async checkpoint(id: string, options?: CheckpointOptions): Promise<CheckpointInfo> {
    return this.#checkpoints.checkpoint(id, options);
  }
  /** The sandbox's checkpoints, oldest first. */
  listCheckpoints(id: string): Promise<CheckpointInfo[]> {
    return this.#checkpoints.list(id);
  }
  /** Puts the sandbox's files back to a checkpoint; running commands see them at once. */
  async restoreCheckpoint(
    id: string,
    checkpointId: string,
    options?: RestoreOptions,
  ): Promise<{ kept?: CheckpointInfo }> {
    return this.#disk.freeing('restoring a checkpoint', () =>
      this.#checkpoints.restore(id, checkpointId, options),
    );
  }
  /** New sandboxes on a checkpoint of sandbox `id` (default: its files now), each with its own changes. */
  async forkSandbox(id: string, options?: ForkOptions): Promise<SandboxInfo[]> {
    return this.#checkpoints.fork(id, options);
  }
  /** Deletes a checkpoint; the files only it held are removed. */
  async deleteCheckpoint(id: string, checkpointId: string): Promise<void> {
    return this.#disk.freeing('deleting a checkpoint', () => this.#checkpoints.remove(id, checkpointId));
  }
  /**
   * Runs one command in a running sandbox of this process: stdout and stderr as UTF-8 strings, or as
   * Buffers with `{ encoding: 'buffer' }` (as `Sandbox.run`).
   */
  run(
    id: string,
    command: string | readonly string[],
    options?: SandboxExecOptions & TextOutput,
  ): Promise<RunResult>;
  run(
    id: string,
    command: string | readonly string[],
    options: SandboxExecOptions & BytesOutput,
  ): Promise<ExecResult>;
  async run(
    id: string,
    command: string | readonly string[],
    options: SandboxExecOptions & { readonly encoding?: OutputEncoding } = {},
  ): Promise<RunResult | ExecResult> {
    const { encoding, rest } = splitEncoding(options);
    const result = await this.#backend.exec(id, command, rest);
    return encoding === 'buffer' ? result : decodeOutput(result);
  }
  /** @deprecated Use `run(id, command, { ...options, encoding: 'buffer' })` (same result: output as Buffers). */
  exec(
    id: string,
    command: string | readonly string[],
    options: SandboxExecOptions = {},
  ): Promise<ExecResult> {
    return this.run(id, command, { ...options, encoding: 'buffer' });
  }
  changes(id: string): Promise<readonly ChangeEntry[]> {
    return this.#backend.changes(id);
  }
  diff(
    id: string,
    options?: { paths?: readonly string[] },
  ): Promise<{ diff: string; binary: readonly string[] }> {
    return this.#backend.diff(id, options);
  }
  /** Also finishes an unfinished commit first (one a crash or a stop cut short). */
  async commit(
    id: string,
    options?: { mode?: CommitMode; paths?: readonly string[] },
  ): Promise<CommitResult> {
    const result = await this.#disk.writing('committing', () => this.#backend.commit(id, options));
    if (result.interrupted === undefined) await settleUnfinished(this.#store, id, 'finished');
    // The commit folded the frozen layers into the writable one first: the delta stands on none.
    await this.#checkpoints.stackEmptied(id);
    return result;
  }
  /** Without `paths` also gives up an unfinished commit (what it applied stays in the codebase). */
  async discard(id: string, options?: { paths?: readonly string[] }): Promise<void> {
    await this.#disk.freeing('discarding changes', () => this.#backend.discard(id, options));
    if (options?.paths === undefined) {
      await settleUnfinished(this.#store, id, 'given up');
      // The delta stands on no checkpoint's layers any more.
      await this.#checkpoints.settle(validateId('sandbox', id), []);
    }
    // A discard of some paths folds the frozen layers into the writable one first: none is left either.
    await this.#checkpoints.stackEmptied(id);
  }
  readFile(id: string, path: string): Promise<Buffer> {
    return this.#backend.readFile(id, path);
  }
  writeFile(id: string, path: string, data: Uint8Array | string): Promise<void> {
    return this.#disk.writing(`writing ${path}`, () => this.#backend.writeFile(id, path, data));
  }
  setRules(id: string, policy: { rules?: readonly unknown[]; preset?: string }): Promise<SandboxInfo> {
    return this.#disk.writing('changing the rules', () => this.sandboxes.policies.setRules(id, policy));
  }
  /** Replaces the network policy; a running sandbox closes the connections it no longer allows. */
  setNetwork(id: string, policy: boolean | NetworkPolicyInput): Promise<SandboxInfo> {
    return this.#disk.writing('changing the network policy', () =>
      this.sandboxes.policies.setNetwork(id, policy),
    );
  }
  /**
   * Gives (or replaces) the value of a declared secret, running or not (docs/secrets.md): `env`, `file`
   * and `command` are read in this process. The value is never returned, stored or logged.
   */
  setSecret(id: string, name: string, source: SecretValueSource): Promise<SandboxInfo> {
    return this.sandboxes.policies.setSecret(id, name, source);
  }
  audit(id: string, query?: AuditQuery): Promise<AuditEvent[]>;
  audit(id: string, query: NetworkAuditQuery): Promise<NetworkAuditEvent[]>;
  audit(id: string, query: AuditQuery | NetworkAuditQuery = {}): Promise<AuditEvent[] | NetworkAuditEvent[]> {
    return this.#backend.audit(id, query);
  }
  /** The worker's memory and per-op statistics of a sandbox this process runs. */
  workerStats(id: string): Promise<WorkerStats> {
    return this.sandboxes.workerStats(id);
  }
  /** Diagnostics: the worker pid of a sandbox this process runs (undefined when it runs none). */
  workerPid(id: string): number | undefined {
    return this.sandboxes.workerPid(id);
  }
  /** Diagnostics: pids of the idle workers spawned ahead of time. */
  get idleWorkerPids(): number[] {
    return this.sandboxes.idleWorkerPids;
  }
  /**
   * Whether a sandbox this process runs keeps the process alive (yes by default): a sandbox started ahead
   * and idle (the library's spare) need not, as whoever started it closes it before the process exits.
   */
  keepProcessAlive(id: string, keep: boolean): void {
    this.sandboxes.keepProcessAlive(id, keep);
  }
  /** The runtime instance of a sandbox this process runs (sessions are built on it). */
  runtimeInstance(id: string): RuntimeInstance {
    return this.sandboxes.runtimeInstance(id);
  }

  /**
   * Removes what nothing refers to any more (sandboxes/gc.ts: dead one-shot sandboxes, failed destroys,
   * orphaned directories and mounts, unreferenced linked codebase records; old stopped sandboxes only
   * when asked) and reports it. Sandboxes a live process runs are never touched.
   */
  gc(options?: GcOptions): Promise<GcReport> {
    return collectGarbage(
      {
        layout: this.layout,
        store: this.#store,
        sandboxes: this.sandboxes,
        codebases: this.codebases,
        runtimes: this.#runtimes,
        logger: this.logger,
      },
      options,
    );
  }

  // --- Sessions ---

  /** Starts a persistent shell in a running sandbox of this process (contract §5). */
  createSession(sandboxId: string, options?: CreateSessionOptions): Promise<Session> {
    return this.sandboxes.withReadyInstance(sandboxId, (box, keys) =>
      this.sessions.create(box, options, keys),
    );
  }
  getSession(id: string): Session {
    return this.sessions.get(id);
  }
  listSessions(filter?: { sandboxId?: string }): Session[] {
    return this.sessions.list(filter);
  }
  closeSession(id: string): Promise<void> {
    return this.sessions.close(id);
  }
  /** Sessions of sandboxes placed on cluster nodes (the `placement` option), run by their node agents. */
  get placedSessions(): OrchestratedSandboxes['sessions'] | undefined {
    return this.#placed?.sessions;
  }

  /** True once close() was called. */
  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /** Stops every sandbox this process runs (deltas kept), then closes the database. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#reaper !== undefined) clearInterval(this.#reaper);
      await this.sessions.closeAll();
      await this.#checkpoints.stopCompacting();
      await this.#placed?.close();
      await this.sandboxes.close();
      // What runtimes keep ahead (docker's idle pooled containers), after every sandbox stopped.
      await this.#runtimes.close((err, runtime) =>
        this.logger.warn({ err, runtime }, 'a runtime did not close cleanly'),
      );
      // After the runtimes: docker's pool releases its idle containers' uids as it closes.
      this.#hostUsers.close();
      this.logger.info('control plane closed');
      await this.#metadata.close();
    })();
    return this.#closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** The library's name for the lower-level client: `await AgentFense.open({ dataDir })`. */
export const AgentFense = ControlPlane;
