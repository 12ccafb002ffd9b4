// The node agent: the sandboxes attached on this node and what the API tier may do with them. The HTTP
// face (server.ts) checks the token and the input's shape; this checks what the input names (sandbox ids,
// the codebase path against the codebase root, or the snapshot id through the node's blob cache) and keeps
// one attach per sandbox.
import { loadavg, cpus, freemem, totalmem } from 'node:os';
import type { AuditQuery } from '@agentfense/audit-trail';
import type { NodeBlobCache, SnapshotLease } from '@agentfense/blobs';
import type { WorkerPool } from '@agentfense/fuse-worker';
import {
  AlreadyExistsError,
  InvalidArgumentError,
  NotFoundError,
  UnavailableError,
  WrongStateError,
  type AuditEvent,
  type CommitMode,
  type PermissionRule,
  type RuntimeLogger,
  type WorkerResult,
} from '@agentfense/protocol';
import type { EngineApi } from '@agentfense/runtime-docker';
import { checkSandboxId, resolveCodebase } from './paths.js';
import { AttachedSandbox, type ExecRequest } from './sandbox.js';
import type { WorkerStatus } from './supervised-view.js';

/** What `health` answers. */
export interface NodeHealth {
  readonly node: string;
  readonly ready: boolean;
  readonly sandboxes: readonly {
    readonly id: string;
    /** False once detached, af-init gone, or the view failed (`worker.failedReason` says why). */
    readonly alive: boolean;
    readonly sessions: number;
    readonly worker: WorkerStatus;
  }[];
  readonly load: {
    readonly avg1: number;
    readonly cpus: number;
    readonly memFreeBytes: number;
    readonly memTotalBytes: number;
  };
}

export class NodeAgentCore {
  readonly #sandboxes = new Map<string, AttachedSandbox>();
  readonly #attaching = new Set<string>();
  /** Sandboxes attached from a snapshot: their tree's lease, released on detach. */
  readonly #leases = new Map<string, SnapshotLease>();
  #ready = false;

  constructor(
    private readonly options: {
      readonly nodeName: string;
      readonly stateDir: string;
      readonly codebaseRoot: string;
      readonly engine: EngineApi;
      readonly logger: RuntimeLogger;
      /** Where snapshots are materialised; without it an attach must name a codebase path. */
      readonly blobCache?: NodeBlobCache;
      /** FUSE workers spawned ahead of time (an attach takes one instead of waiting for a spawn). */
      readonly workers: WorkerPool;
    },
  ) {}

  markReady(): void {
    this.#ready = true;
  }

  get ready(): boolean {
    return this.#ready;
  }

  /**
   * Attaches a sandbox on a codebase: either `codebasePath` (a directory inside the codebase root) or
   * `snapshotId` (materialised through the blob cache, leased until detach), never both.
   */
  async attach(input: {
    readonly sandboxId: unknown;
    readonly codebasePath?: unknown;
    readonly snapshotId?: unknown;
    readonly rules: readonly PermissionRule[];
    readonly diskQuotaBytes?: number;
    readonly auditAllowed?: boolean;
    readonly memoryBytes?: number;
  }): Promise<{ sandboxId: string; container: string }> {
    const sandboxId = checkSandboxId(input.sandboxId);
    if ((input.codebasePath === undefined) === (input.snapshotId === undefined)) {
      throw new InvalidArgumentError('one of codebasePath and snapshotId');
    }
    const cache = this.options.blobCache;
    if (input.snapshotId !== undefined && cache === undefined) {
      throw new UnavailableError('this node has no blob store (agentfense node --blobs DIR)');
    }
    const codebasePath =
      input.codebasePath === undefined
        ? undefined
        : await resolveCodebase(this.options.codebaseRoot, input.codebasePath);
    if (this.#sandboxes.has(sandboxId) || this.#attaching.has(sandboxId)) {
      throw new AlreadyExistsError(`${sandboxId} is already attached on this node`);
    }
    this.#attaching.add(sandboxId);
    let lease: SnapshotLease | undefined;
    try {
      // The snapshot id is checked by the cache (a digest) before it names anything on disk.
      if (codebasePath === undefined) lease = await cache!.materialise(input.snapshotId as never);
      const sandbox = await AttachedSandbox.attach({
        request: {
          sandboxId,
          codebasePath: codebasePath ?? lease!.path,
          rules: input.rules,
          ...(input.diskQuotaBytes === undefined ? {} : { diskQuotaBytes: input.diskQuotaBytes }),
          ...(input.auditAllowed === undefined ? {} : { auditAllowed: input.auditAllowed }),
          ...(input.memoryBytes === undefined ? {} : { memoryBytes: input.memoryBytes }),
        },
        stateDir: this.options.stateDir,
        engine: this.options.engine,
        logger: this.options.logger,
        takeWorker: () => this.options.workers.take(),
      });
      this.#sandboxes.set(sandboxId, sandbox);
      if (lease !== undefined) this.#leases.set(sandboxId, lease);
      return { sandboxId, container: sandbox.container.id };
    } catch (err) {
      lease?.release();
      throw err;
    } finally {
      this.#attaching.delete(sandboxId);
    }
  }

  sandbox(id: string): AttachedSandbox {
    const sandbox = this.#sandboxes.get(checkSandboxId(id));
    if (sandbox === undefined) throw new NotFoundError(`${id} is not attached on this node`);
    return sandbox;
  }

  exec(id: string, request: ExecRequest): ReturnType<AttachedSandbox['exec']> {
    return this.sandbox(id).exec(request);
  }

  readFile(id: string, path: string): Promise<{ readonly data: Uint8Array }> {
    return this.sandbox(id).request('readFile', { path });
  }

  async writeFile(id: string, path: string, data: Uint8Array): Promise<void> {
    await this.sandbox(id).request('writeFile', { path, data });
  }

  changes(id: string): Promise<WorkerResult<'changes'>> {
    return this.sandbox(id).request('changes', {});
  }

  diff(id: string, paths?: readonly string[]): Promise<WorkerResult<'diff'>> {
    return this.sandbox(id).request('diff', paths === undefined ? {} : { paths });
  }

  commit(id: string, mode: CommitMode, paths?: readonly string[]): Promise<WorkerResult<'commit'>> {
    // A snapshot's tree is links to the node's shared cache objects: committing would write into them.
    if (this.#leases.has(this.sandbox(id).id)) {
      return Promise.reject(
        new WrongStateError(
          `${id} was attached from a snapshot: read its changes or diff instead of committing`,
        ),
      );
    }
    return this.sandbox(id).request('commit', paths === undefined ? { mode } : { mode, paths });
  }

  /**
   * Replaces the sandbox's file rules: its worker applies them at once, to what is open and cached too
   * (the API tier keeps them in the sandbox's record for a later attach).
   */
  async setRules(id: string, rules: readonly PermissionRule[]): Promise<void> {
    await this.sandbox(id).setRules(rules);
  }

  /** The sandbox's audit trail on this node: its worker's decisions, newest last. */
  audit(id: string, query: AuditQuery): Promise<AuditEvent[]> {
    return this.sandbox(id).audit(query);
  }

  async discard(id: string, paths?: readonly string[]): Promise<void> {
    await this.sandbox(id).request('discard', paths === undefined ? {} : { paths });
  }

  async detach(id: string, options: { readonly dropDelta?: boolean } = {}): Promise<void> {
    const sandbox = this.sandbox(id);
    this.#sandboxes.delete(sandbox.id);
    const lease = this.#leases.get(sandbox.id);
    this.#leases.delete(sandbox.id);
    try {
      await sandbox.detach(options);
    } finally {
      lease?.release();
    }
  }

  health(): NodeHealth {
    return {
      node: this.options.nodeName,
      ready: this.#ready,
      sandboxes: [...this.#sandboxes.values()].map((s) => ({
        id: s.id,
        alive: s.alive,
        sessions: s.sessions.count,
        worker: s.worker,
      })),
      load: {
        avg1: loadavg()[0] ?? 0,
        cpus: cpus().length,
        memFreeBytes: freemem(),
        memTotalBytes: totalmem(),
      },
    };
  }

  /** Detaches every sandbox (the agent is stopping); deltas stay. Idle workers are stopped. */
  async close(): Promise<void> {
    for (const id of [...this.#sandboxes.keys()]) await this.detach(id).catch(() => undefined);
    await this.options.workers.close();
  }
}
