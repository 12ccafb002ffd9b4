// One sandbox attached on this node: its supervised FUSE worker (the view on the host), the view and
// af-init's directory attached inside its container, and the connection to af-init that every exec and
// session goes through. attach() builds it in that order and undoes what it did when a step fails;
// detach() undoes all of it, keeping the delta unless told to drop it.
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { AuditWriter, readAudit, type AuditQuery } from '@agentfense/audit-trail';
import type { LauncherClient } from '@agentfense/launcher';
import {
  createWorkerCgroup,
  identityOf,
  openPinnedDir,
  removeTree,
  removeWorkerCgroup,
  workerMemoryBound,
} from '@agentfense/fuse-worker';
import type { WorkerHandle } from '@agentfense/fuse-worker';
import {
  UnavailableError,
  validateRules,
  type AuditEvent,
  type ExecResult,
  type OutputCallback,
  type PermissionRule,
  type RuntimeLogger,
  type WorkerMethod,
  type WorkerParams,
  type WorkerResult,
} from '@agentfense/protocol';
import {
  containerEnv,
  listenForLauncher,
  resolveContainerCgroup,
  runInitExec,
  type ContainerCgroup,
  type EngineApi,
  type LauncherListener,
} from '@agentfense/runtime-docker';
import { findContainer, type SandboxContainer } from './containers.js';
import { LAUNCHER_NAME, WORKSPACE_NAME, attachInContainer, detachInContainer } from './mountns.js';
import { sandboxPaths, type SandboxPaths } from './paths.js';
import { NO_REPORTED_LIMITS, launcherSessionHost } from './session-spawn.js';
import { Sessions } from './sessions.js';
import { SupervisedView, type WorkerStatus } from './supervised-view.js';

/** What the API tier sends to attach a sandbox (already checked: id, codebase path inside the root). */
export interface AttachRequest {
  readonly sandboxId: string;
  /** The codebase's real path on this node, inside the codebase root. */
  readonly codebasePath: string;
  readonly rules: readonly PermissionRule[];
  /** Bytes the delta may hold (absent: no quota). */
  readonly diskQuotaBytes?: number;
  /** Whether allowed accesses are audited too (denials always are). */
  readonly auditAllowed?: boolean;
  /** The sandbox's memory limit: its worker's own bound is derived from it (workerMemoryBound). */
  readonly memoryBytes?: number;
}

/** One command, as the API tier asks for it. */
export interface ExecRequest {
  readonly argv: readonly string[];
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly stdin?: Uint8Array;
  readonly timeoutMs?: number;
  readonly onStdout?: OutputCallback;
  readonly onStderr?: OutputCallback;
  readonly signal?: AbortSignal;
}

/** Output kept per command for the result (the stream carries all of it). */
const MAX_OUTPUT_BYTES = 16 << 20;
const WORKER_STOP_GRACE_MS = 5_000;

export class AttachedSandbox {
  #stopped = false;

  private constructor(
    readonly id: string,
    readonly paths: SandboxPaths,
    readonly container: SandboxContainer,
    private readonly view: SupervisedView,
    private readonly listener: LauncherListener,
    private readonly launcher: LauncherClient,
    private readonly cgroup: ContainerCgroup,
    private readonly env: Readonly<Record<string, string>>,
    readonly sessions: Sessions,
    private readonly logger: RuntimeLogger,
    private readonly trail: AuditWriter,
  ) {}

  static async attach(options: {
    readonly request: AttachRequest;
    readonly stateDir: string;
    readonly engine: EngineApi;
    readonly logger: RuntimeLogger;
    /** An unmounted worker: the node agent's pool's idle one, or a fresh spawn. */
    readonly takeWorker: () => Promise<WorkerHandle>;
  }): Promise<AttachedSandbox> {
    const { request, engine, logger } = options;
    const rules = validateRules(request.rules);
    // What the sandbox makes its worker hold is charged to the sandbox, not to the node: the worker
    // joins a memory cgroup of its own before it mounts, as on a single host.
    const cgroupMade = createWorkerCgroup({
      sandboxId: request.sandboxId,
      boundBytes: workerMemoryBound(request.memoryBytes),
      logger,
    });
    // Asked for first, so a spawn it has to wait for overlaps the engine's answers and the directories.
    const taking = options.takeWorker();
    // Observed now: a failed take surfaces where the worker is used, not as an unhandled rejection.
    taking.catch(() => undefined);
    // Undone last to first: the worker stops before its cgroup goes (supervision stops its own).
    let supervised = false;
    const undo: (() => Promise<unknown>)[] = [
      () => removeWorkerCgroup({ sandboxId: request.sandboxId, logger }),
      async () => supervised || (await taking).stop({ graceMs: WORKER_STOP_GRACE_MS }),
    ];
    try {
      const container = await findContainer(engine, request.sandboxId);
      const paths = sandboxPaths(options.stateDir, request.sandboxId);
      await mkdir(paths.dir, { recursive: true, mode: 0o700 });
      await chmod(paths.dir, 0o700);
      await mkdir(paths.view, { recursive: true, mode: 0o700 });
      const lower = await openPinnedDir(request.codebasePath);
      const lowerIdentity = await identityOf(lower).finally(() => lower.close());
      // The trail is kept here, beside the delta, and read by the API tier through this agent.
      const trail = new AuditWriter(paths.auditLog, (err) =>
        logger.warn({ err, sandboxId: request.sandboxId }, 'could not write the audit trail'),
      );
      // A pooled worker was spawned before its sandbox was known: the mount gives it its log and name.
      // A worker that fails to mount is killed and its mountpoint cleared by supervision's start.
      supervised = true;
      const made: { sessions?: Sessions } = {};
      const view = await SupervisedView.start({
        sandboxId: request.sandboxId,
        paths,
        first: taking,
        takeWorker: options.takeWorker,
        cgroup: cgroupMade,
        logger,
        onAudit: (events) => trail.append(events),
        // Sessions exist once af-init answers; a restart before that has none to end.
        onViewReplaced: () => void made.sessions?.closeAfterRestart().catch(() => undefined),
        mount: {
          lowerDir: request.codebasePath,
          lowerIdentity,
          deltaDir: paths.delta,
          mountpoint: paths.view,
          rules,
          // The container's user is not the worker's: it may use the mount, and it alone besides root.
          allowOther: true,
          ownerUid: container.uid,
          ownerGid: container.gid,
          callerUid: container.uid,
          auditAllowed: request.auditAllowed === true,
          ...(request.diskQuotaBytes === undefined ? {} : { diskQuotaBytes: request.diskQuotaBytes }),
        },
      });
      undo.push(() => view.stop());
      const listener = await listenForLauncher({
        parent: paths.dir,
        user: `${container.uid}:${container.gid}`,
        logger,
      });
      undo.push(() => listener.release());
      await attachInContainer({
        pid: container.pid,
        source: paths.view,
        name: WORKSPACE_NAME,
        readonly: false,
      });
      undo.push(() => detachInContainer({ pid: container.pid, name: WORKSPACE_NAME }));
      view.inContainer(container.pid);
      // The view is in place before the marker and af-init's socket appear in the container.
      await writeFile(posix.join(listener.dir, 'ready'), '', { mode: 0o444 });
      await attachInContainer({
        pid: container.pid,
        source: listener.dir,
        name: LAUNCHER_NAME,
        readonly: true,
      });
      undo.push(() => detachInContainer({ pid: container.pid, name: LAUNCHER_NAME }));
      listener.arm();
      const [launcher, env, cgroup] = await Promise.all([
        listener.client,
        containerEnv(engine, container.id),
        resolveContainerCgroup({ initPid: container.pid }),
      ]);
      if (cgroup === null) throw new UnavailableError("the container's cgroup is not visible from the host");
      launcher.keepProcessAlive(false);
      const sessions = new Sessions(
        launcherSessionHost({
          sandboxId: request.sandboxId,
          client: launcher,
          cgroup,
          env,
          workspace: `/${WORKSPACE_NAME}`,
        }),
      );
      made.sessions = sessions;
      return new AttachedSandbox(
        request.sandboxId,
        paths,
        container,
        view,
        listener,
        launcher,
        cgroup,
        env,
        sessions,
        logger,
        trail,
      );
    } catch (err) {
      for (const step of undo.reverse()) await step().catch(() => undefined);
      throw err;
    }
  }

  /** Serving: not detached, af-init connected, and the view not failed (a worker being replaced counts). */
  get alive(): boolean {
    return !this.#stopped && this.view.status.state !== 'failed' && this.launcher.alive;
  }

  /** The worker's state, restarts and, once the view is lost, why. */
  get worker(): WorkerStatus {
    return this.view.status;
  }

  /** Runs one command through af-init; output streams through the callbacks as it comes. */
  exec(request: ExecRequest): Promise<ExecResult> {
    return runInitExec({
      client: this.launcher,
      argv: request.argv,
      cwd: request.cwd ?? `/${WORKSPACE_NAME}`,
      env: { ...this.env, ...request.env },
      ...(request.stdin === undefined ? {} : { stdin: request.stdin }),
      ...(request.timeoutMs === undefined ? {} : { timeoutMs: request.timeoutMs }),
      ...(request.signal === undefined ? {} : { signal: request.signal }),
      ...(request.onStdout === undefined ? {} : { onStdout: request.onStdout }),
      ...(request.onStderr === undefined ? {} : { onStderr: request.onStderr }),
      audit: { runtime: 'docker', argv: [...request.argv], limits: NO_REPORTED_LIMITS },
      maxOutputBytes: MAX_OUTPUT_BYTES,
      cgroup: this.cgroup,
      watchOom: true,
      logger: this.logger,
      stopped: () => this.#stopped,
    });
  }

  /**
   * A worker request, with answers in parts (changes, diff, commit) fetched whole; after a replacement in
   * progress, and saying why a worker that died under it exited.
   */
  request<M extends WorkerMethod>(method: M, params: WorkerParams<M>): Promise<WorkerResult<M>> {
    return this.view.supervisor.requestWhole(method, params);
  }

  /** Replaces the rules now, and for every worker that replaces this one. */
  setRules(rules: readonly PermissionRule[]): Promise<void> {
    return this.view.supervisor.setRules(validateRules(rules));
  }

  /** The sandbox's audit trail, with what the worker still batches written first. */
  async audit(query: AuditQuery): Promise<AuditEvent[]> {
    // A stats request has the worker send the records it batches, as the control plane does.
    if (!this.#stopped) await this.view.supervisor.request('stats', {}).catch(() => undefined);
    await this.trail.flush();
    return readAudit(this.paths.auditLog, query);
  }

  /** Ends sessions, takes the mounts out of the container, stops af-init and the worker. */
  async detach(options: { readonly dropDelta?: boolean } = {}): Promise<void> {
    this.#stopped = true;
    this.view.leaveContainer();
    await this.sessions.closeAll();
    const pid = this.container.pid;
    for (const name of [LAUNCHER_NAME, WORKSPACE_NAME]) {
      // A container that already ended took its mounts with it.
      await detachInContainer({ pid, name }).catch(() => undefined);
    }
    await this.listener.release();
    await this.view.stop();
    await removeWorkerCgroup({ sandboxId: this.id, logger: this.logger }).catch((err: unknown) =>
      this.logger.warn({ err, sandboxId: this.id }, 'could not remove the worker cgroup'),
    );
    await this.trail.flush();
    await rm(this.paths.workerPid, { force: true });
    if (options.dropDelta === true) await removeTree(this.paths.dir);
  }
}
