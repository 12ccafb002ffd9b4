// Sandboxes placed on cluster nodes: the record in the shared store, the container through the
// orchestrator (place, watch, locate, remove), the view, commands and delta through the node agent on the
// sandbox's current node. Nothing about a sandbox is kept in this process but a cache of where it runs, so
// any API replica serves any sandbox; the cache is dropped when the watch reports it moved or its node
// agent stops answering. The codebase goes to the node as a snapshot in the blob store (placement.blobs),
// or else as its path on this host, which every node must then see at the same path.
import { rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { AuditQuery, NetworkAuditQuery } from '@agentfense/audit-trail';
import {
  AgentFenseError,
  AlreadyExistsError,
  NotFoundError,
  WrongStateError,
  type ChangeEntry,
  type CommitMode,
  type CommitResult,
  type ExecResult,
  type PermissionRule,
} from '@agentfense/protocol';
import { snapshotDirectory } from '@agentfense/blobs';
import { OrchestratorError, type Location, type PlacementStatus } from '@agentfense/orchestrator';
import type { CodebaseService } from '../codebases/service.js';
import { validateId } from '../ids.js';
import type { DataLayout } from '../paths.js';
import { KeyedLock } from '../sandboxes/keyed-lock.js';
import { assertTransition } from '../sandboxes/state.js';
import type { SandboxExecOptions, SandboxInfo } from '../sandboxes/types.js';
import type { MetadataStore } from '../store/metadata.js';
import type { PlacedSessionStore } from '../store/placed-sessions.js';
import type { WarmClaimStore } from '../store/warm-claims.js';
import { sandboxInfo, type SandboxRow, type SandboxStore } from '../store/sandboxes.js';
import type { AuditRecords, SandboxBackend } from './backend.js';
import { RemoteSandboxError } from './errors.js';
import { remoteExec } from './exec.js';
import { NodeAgentClient } from './node-agent-client.js';
import { PlacedSessions } from './sessions.js';
import { DEFAULT_READY_TIMEOUT_MS, ORCHESTRATED, type PlacementOptions } from './options.js';
import { waitReady } from './wait-ready.js';
import { WarmRefiller, claimWarm } from './warm.js';

/** How long a re-attach waits for the container of a sandbox placed again to reach its node. */
const REATTACH_WAIT_MS = 30_000;

export interface OrchestratedDeps {
  /** Sandbox records and the records of their sessions (which sandbox holds each). */
  readonly metadata: Pick<MetadataStore, 'sandboxes' | 'placedSessions' | 'warmClaims'>;
  readonly codebases: CodebaseService;
  readonly layout: DataLayout;
  readonly logger: Logger;
  readonly placement: PlacementOptions;
}

export class OrchestratedSandboxes implements SandboxBackend {
  readonly #deps: OrchestratedDeps;
  readonly #store: SandboxStore;
  readonly #sessionRecords: PlacedSessionStore;
  readonly #claims: WarmClaimStore;
  /** Refills the orchestrator's warm pool, when it keeps one. */
  readonly #refiller: WarmRefiller | undefined;
  readonly #logger: Logger;
  readonly #locks = new KeyedLock();
  readonly #located = new Map<string, Location>();
  /** Each sandbox's placement id (a claimed warm placement's, or its own) as of its start. */
  readonly #placements = new Map<string, { readonly startedAt: number | null; readonly id: string }>();
  /** The last `lost` this replica's watch saw per sandbox, until its `ready` re-attaches it. */
  readonly #lost = new Map<string, Extract<PlacementStatus, { state: 'lost' }>>();
  readonly #watching = new AbortController();
  readonly #watch: Promise<void>;
  /** Sessions of placed sandboxes: run by the node agents, recorded in the store. */
  readonly sessions: PlacedSessions;

  constructor(deps: OrchestratedDeps) {
    this.#deps = deps;
    this.#store = deps.metadata.sandboxes;
    this.#sessionRecords = deps.metadata.placedSessions;
    this.#claims = deps.metadata.warmClaims;
    this.#logger = deps.logger.child({ component: 'placement' });
    const { warm } = deps.placement.orchestrator;
    this.#refiller =
      warm === undefined ? undefined : new WarmRefiller({ warm, claims: this.#claims, logger: this.#logger });
    this.sessions = new PlacedSessions({
      records: this.#sessionRecords,
      route: (id) => this.#route(id),
      unreachable: (id, call) => this.#unreachable(id, call),
    });
    this.#watch = this.#follow();
  }

  async start(id: string): Promise<SandboxInfo> {
    validateId('sandbox', id);
    return this.#locks.run(id, async () => {
      const before = await this.#store.updateLocked(id, (row) => {
        if (row.owner_instance === ORCHESTRATED) {
          if (row.state === 'RUNNING') return undefined;
          throw new WrongStateError(`sandbox ${id} is being placed by another API replica`, {
            details: { id },
          });
        }
        if (row.owner_pid !== null) throw new WrongStateError(`sandbox ${id} runs in a local process`);
        assertTransition(id, row.state, 'RUNNING');
        return { owner_instance: ORCHESTRATED, state_reason: 'being placed' };
      });
      if (before.owner_instance === ORCHESTRATED) return this.#info(id);
      const { orchestrator } = this.#deps.placement;
      const began = Date.now();
      const shape = { image: this.#deps.placement.image, resources: resourcesOf(before) };
      let placementId = id;
      try {
        const warm = orchestrator.warm;
        const claimed =
          warm === undefined
            ? undefined
            : await claimWarm({ warm, claims: this.#claims, logger: this.#logger }, id, shape);
        if (claimed !== undefined) {
          placementId = claimed;
          this.#refiller?.poke();
        } else {
          await orchestrator.place({ sandboxId: id, ...shape }).catch((err: unknown) => {
            // Placed already (a start cut short by a crash): the same container serves.
            if (!(err instanceof OrchestratorError && err.reason === 'already-placed')) throw err;
          });
        }
        const placedMs = Date.now() - began;
        const timeout = this.#deps.placement.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
        // A warm placement was offered because it runs: its node is where locate finds it.
        if (claimed === undefined) await waitReady(orchestrator, id, timeout);
        const readyMs = Date.now() - began;
        await this.#attach(before, placementId);
        const nodeName = this.#located.get(id)?.nodeName ?? '?';
        const attachedMs = Date.now() - began;
        const startedAt = Date.now();
        await this.#store.update(id, {
          state: 'RUNNING',
          state_reason: `placed on node ${nodeName}${claimed === undefined ? '' : ' (from the warm pool)'}`,
          started_at: startedAt,
        });
        this.#placements.set(id, { startedAt, id: placementId });
        // Where a start's time goes (ms since it began), for operators and `pnpm bench:cluster`.
        const steps = { placedMs, readyMs, attachedMs };
        this.#logger.info(
          { sandboxId: id, node: nodeName, placementId, steps },
          'sandbox placed and attached',
        );
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        await orchestrator
          .remove(placementId)
          .catch((e: unknown) => this.#logger.warn({ err: e }, 'remove failed'));
        await this.#claims.release(id, Date.now());
        this.#located.delete(id);
        this.#placements.delete(id);
        await this.#store.update(id, {
          state: 'ERROR',
          state_reason: `placement failed: ${message}`,
          owner_instance: null,
          stopped_at: Date.now(),
        });
        throw err instanceof RemoteSandboxError
          ? err
          : new RemoteSandboxError('placement-failed', `sandbox ${id} was not placed: ${message}`, {
              cause: err,
              details: { id, ...(err instanceof AgentFenseError ? { cause: err.code } : {}) },
            });
      }
      return this.#info(id);
    });
  }

  stop(id: string, options: { reason?: string } = {}): Promise<SandboxInfo> {
    validateId('sandbox', id);
    return this.#locks.run(id, async () => {
      const row = await this.#store.get(id);
      if (row.state === 'STOPPED') return sandboxInfo(row);
      assertTransition(id, row.state, 'STOPPED');
      if (row.owner_instance === ORCHESTRATED) await this.#unplace(id, false);
      await this.#sessionRecords.deleteBySandbox(id);
      await this.#store.update(id, {
        state: 'STOPPED',
        state_reason: options.reason ?? null,
        owner_instance: null,
        stopped_at: Date.now(),
      });
      return this.#info(id);
    });
  }

  destroy(id: string, options: { keepDelta?: boolean } = {}): Promise<void> {
    validateId('sandbox', id);
    return this.#locks.run(id, async () => {
      const row = await this.#store.get(id);
      if (row.owner_instance === ORCHESTRATED) await this.#unplace(id, options.keepDelta !== true);
      else await this.#deps.placement.orchestrator.remove(id);
      await this.#sessionRecords.deleteBySandbox(id);
      await this.#store.delete(id);
      await rm(this.#deps.layout.sandbox(id).dir, { recursive: true, force: true });
      this.#logger.info({ sandboxId: id }, 'sandbox destroyed');
    });
  }

  async exec(
    id: string,
    command: string | readonly string[],
    options: SandboxExecOptions = {},
  ): Promise<ExecResult> {
    const { row, client } = await this.#route(id);
    return this.#unreachable(id, remoteExec(client, row, command, options));
  }

  async changes(id: string): Promise<readonly ChangeEntry[]> {
    const { client } = await this.#route(id);
    return this.#unreachable(id, client.changes(id));
  }

  async diff(id: string): Promise<{ diff: string; binary: readonly string[] }> {
    const { client } = await this.#route(id);
    return this.#unreachable(id, client.diff(id));
  }

  async commit(
    id: string,
    options: { mode?: CommitMode; paths?: readonly string[] } = {},
  ): Promise<CommitResult> {
    const { row, client } = await this.#route(id);
    if (row.snapshot_id !== null) {
      // Its node's tree is the cache's shared objects, and the codebase is on this tier: the node
      // cannot commit, and applying its changes here is not built.
      throw new RemoteSandboxError(
        'not-routed',
        `sandbox ${id} runs on a snapshot of its codebase on its node: commit is not applied from there yet; read its changes or diff and write them to the codebase`,
        { details: { id } },
      );
    }
    return this.#unreachable(id, client.commit(id, options));
  }

  async discard(id: string, options: { paths?: readonly string[] } = {}): Promise<void> {
    const { client } = await this.#route(id);
    return this.#unreachable(id, client.discard(id, options));
  }

  /** Replaces the file rules on the sandbox's node (the caller keeps them in the record). */
  async setRules(id: string, rules: readonly PermissionRule[]): Promise<void> {
    const { client } = await this.#route(id);
    return this.#unreachable(id, client.setRules(id, rules));
  }

  /**
   * The trail its node keeps. A placed sandbox has no network (no policy point runs for it on a node),
   * so its network records are none.
   */
  async audit(id: string, query: AuditQuery | NetworkAuditQuery = {}): Promise<AuditRecords> {
    const { client } = await this.#route(id);
    if ('kind' in query) return [];
    return this.#unreachable(id, client.audit(id, query));
  }

  async readFile(id: string, path: string): Promise<Buffer> {
    const { client } = await this.#route(id);
    return this.#unreachable(id, client.readFile(id, path));
  }

  async writeFile(id: string, path: string, data: Uint8Array | string): Promise<void> {
    const { client } = await this.#route(id);
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    return this.#unreachable(id, client.writeFile(id, path, bytes));
  }

  /** Stops following placements; sandboxes keep running on their nodes. */
  async close(): Promise<void> {
    await this.#refiller?.close();
    this.#watching.abort();
    await this.#watch;
    await this.#locks.idle();
  }

  async #info(id: string): Promise<SandboxInfo> {
    return sandboxInfo(await this.#store.get(id));
  }

  /** The record (which must say the sandbox is placed and running) and the client of its node agent. */
  async #route(id: string): Promise<{ row: SandboxRow; client: NodeAgentClient }> {
    const row = await this.#store.get(validateId('sandbox', id));
    if (row.owner_instance !== ORCHESTRATED || row.state !== 'RUNNING') {
      throw new RemoteSandboxError(
        'not-placed',
        `sandbox ${id} is ${row.state}${row.owner_instance === ORCHESTRATED ? ' (being placed)' : ''}, not running on a node`,
        { details: { id } },
      );
    }
    return { row, client: await this.#client(id, await this.#placementOf(row)) };
  }

  /** The id the orchestrator and the node know the sandbox by, as of its last start (cached per start). */
  async #placementOf(row: SandboxRow): Promise<string> {
    const known = this.#placements.get(row.id);
    if (known !== undefined && known.startedAt === row.started_at) return known.id;
    const id = (await this.#claims.placementOf(row.id)) ?? row.id;
    this.#placements.set(row.id, { startedAt: row.started_at, id });
    return id;
  }

  async #client(id: string, placementId: string): Promise<NodeAgentClient> {
    let location = this.#located.get(id);
    if (location === undefined) {
      location = await this.#deps.placement.orchestrator.locate(placementId);
      if (location === undefined) {
        throw new RemoteSandboxError('not-placed', `sandbox ${id} is not ready on any node now`, {
          details: { id },
        });
      }
      this.#located.set(id, location);
    }
    return new NodeAgentClient({
      ...location.nodeAgent,
      token: this.#deps.placement.nodeAgentToken,
      placementOf: (sandboxId) => (sandboxId === id ? placementId : sandboxId),
    });
  }

  /** A node agent that stops answering may have moved with its sandbox: the next call locates it afresh. */
  async #unreachable<T>(id: string, call: Promise<T>): Promise<T> {
    try {
      return await call;
    } catch (err) {
      if (err instanceof RemoteSandboxError && err.reason === 'node-agent-unreachable')
        this.#located.delete(id);
      throw err;
    }
  }

  /** Attaches the sandbox's view on its node; one attached by another replica meanwhile is kept. */
  async #attach(row: SandboxRow, placementId: string): Promise<void> {
    const source = await this.#source(row);
    const client = await this.#client(row.id, placementId);
    const request = {
      sandboxId: row.id,
      ...source,
      rules: row.rules,
      auditAllowed: row.audit_allowed,
      ...(row.resources.memoryBytes === undefined ? {} : { memoryBytes: row.resources.memoryBytes }),
      ...(row.resources.diskBytes === undefined ? {} : { diskQuotaBytes: row.resources.diskBytes }),
    };
    try {
      await client.attach(request);
    } catch (err) {
      if (!(err instanceof AlreadyExistsError)) throw err;
      // Attached, by another replica, or for a container that has since ended (its af-init gone).
      const { sandboxes } = await client.health();
      if (sandboxes.some((s) => s.id === placementId && s.alive)) return;
      await client.detach(row.id).catch((e: unknown) => {
        if (!(e instanceof NotFoundError)) throw e;
      });
      await client.attach(request);
    }
  }

  /**
   * What the node attaches the view on. With a blob store: the snapshot the sandbox was first attached
   * on, made and recorded then (its delta is relative to it, so a restart or a lost node's replacement
   * gets the same one); without: the codebase's path, which every node must see.
   */
  async #source(row: SandboxRow): Promise<{ codebasePath: string } | { snapshotId: string }> {
    const { blobs } = this.#deps.placement;
    if (blobs !== undefined && row.snapshot_id !== null) return { snapshotId: row.snapshot_id };
    const { path } = await this.#deps.codebases.lowerForMount(row.codebase_id);
    if (blobs === undefined) return { codebasePath: path };
    const { snapshotId } = await snapshotDirectory(blobs, path);
    await this.#store.update(row.id, { snapshot_id: snapshotId });
    return { snapshotId };
  }

  /**
   * The attach after a sandbox was placed again: the orchestrator may report it ready a moment before
   * its container is on the new node's engine, where the node agent answers not found; it is tried again
   * for REATTACH_WAIT_MS before the sandbox is left lost.
   */
  async #attachOnceThere(row: SandboxRow, placementId: string): Promise<void> {
    const deadline = Date.now() + REATTACH_WAIT_MS;
    for (;;) {
      try {
        await this.#attach(row, placementId);
        return;
      } catch (err) {
        if (!(err instanceof NotFoundError) || Date.now() > deadline) throw err;
        this.#located.delete(row.id);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  /** Detaches the view (dropping the delta or not) and removes the placement. */
  async #unplace(id: string, dropDelta: boolean): Promise<void> {
    const placementId = (await this.#claims.placementOf(id)) ?? id;
    try {
      const client = await this.#client(id, placementId);
      await client.detach(id, { dropDelta });
    } catch (err) {
      // Not attached, not placed, or its node gone: the placement is removed all the same.
      this.#logger.warn({ sandboxId: id, err }, 'detach before removal failed');
    }
    this.#located.delete(id);
    this.#placements.delete(id);
    await this.#deps.placement.orchestrator.remove(placementId);
    // A claimed warm placement is removed with its sandbox, never handed back to the pool.
    await this.#claims.release(id, Date.now());
  }

  /** Follows every placement: a sandbox lost and placed again is attached again on its new node. */
  async #follow(): Promise<void> {
    const signal = this.#watching.signal;
    while (!signal.aborted) {
      try {
        for await (const status of this.#deps.placement.orchestrator.watch({ signal })) {
          await this.#onStatus(status).catch((err: unknown) =>
            this.#logger.warn({ err, sandboxId: status.sandboxId }, 'placement change not handled'),
          );
        }
      } catch (err) {
        if (signal.aborted) return;
        this.#logger.warn({ err }, 'placement watch failed; following again');
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  }

  async #onStatus(status: PlacementStatus): Promise<void> {
    // Statuses name placements: a claimed warm one's id is not its sandbox's; idle ones name no sandbox.
    const placementId = status.sandboxId;
    const id = (await this.#claims.sandboxOf(placementId)) ?? placementId;
    if (status.state !== 'ready') this.#located.delete(id);
    if (status.state === 'gone') this.#lost.delete(id);
    if (status.state === 'lost') {
      this.#lost.set(id, status);
      const row = await this.#store.find(id);
      if (row?.owner_instance !== ORCHESTRATED || row.state !== 'RUNNING') return;
      await this.#store.update(id, {
        state_reason: `${lostText(status)}${status.replaced ? '; being placed again' : ''}`,
      });
      this.#logger.warn({ sandboxId: id, status }, 'sandbox placement lost');
      return;
    }
    if (status.state !== 'ready') return;
    const location = this.#located.get(id);
    if (location !== undefined && location.nodeName !== status.nodeName) this.#located.delete(id);
    const lost = this.#lost.get(id);
    if (lost === undefined) return;
    this.#lost.delete(id);
    await this.#locks.run(id, async () => {
      const row = await this.#store.find(id);
      if (row?.owner_instance !== ORCHESTRATED || row.state !== 'RUNNING') return;
      this.#located.delete(id);
      await this.#attachOnceThere(row, placementId);
      await this.#store.update(id, {
        state_reason: `${lostText(lost)}; attached again on node ${status.nodeName}`,
      });
      this.#logger.info({ sandboxId: id, node: status.nodeName }, 'sandbox attached again');
    });
  }
}

function lostText(lost: Extract<PlacementStatus, { state: 'lost' }>): string {
  return `lost on node ${lost.nodeName ?? 'unknown'} (${lost.reason}): ${lost.detail}`;
}

/** What the orchestrator reserves and limits: the sandbox's memory, and its CPU quota as millicores. */
function resourcesOf(row: SandboxRow): { cpuMillis: number; memoryBytes: number } {
  const { cpuQuota, memoryBytes } = row.resources;
  return {
    cpuMillis: cpuQuota === undefined ? 1000 : Math.max(1, Math.round(cpuQuota / 100)),
    memoryBytes: memoryBytes ?? 4 * 1024 ** 3,
  };
}
