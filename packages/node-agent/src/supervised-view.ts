// A placed sandbox's view kept alive: its FUSE worker runs under the same supervision as on a single host
// (WorkerSupervisor: a worker that exits or stops answering is replaced over the same delta, whose
// journal the new worker recovers), and a replacement's view is put back where the container sees it.
// The container holds a clone of the host mount (af-mountns): a new mount on the host does not reach it,
// so the dead clone is detached in the container and the new view attached in its place.
import { writeFile } from 'node:fs/promises';
import {
  WorkerSupervisor,
  type SupervisorLogger,
  type WorkerCgroup,
  type WorkerHandle,
} from '@agentfense/fuse-worker';
import {
  processStartTime,
  type AuditEvent,
  type MountParams,
  type RuntimeLogger,
} from '@agentfense/protocol';
import { WORKSPACE_NAME, attachInContainer, detachInContainer } from './mountns.js';
import type { SandboxPaths } from './paths.js';

/** What `health` reports of a sandbox's worker. */
export interface WorkerStatus {
  /** running: the view is served; failed: it is not, and `failedReason` says why and what was lost. */
  readonly state: 'running' | 'restarting' | 'failed';
  /** Workers replaced since the attach. */
  readonly restarts: number;
  readonly lastRestartReason?: string;
  readonly failedReason?: string;
}

/** The node agent's logger has two levels; supervision logs at pino's six. */
function supervisorLogger(logger: RuntimeLogger, sandboxId: string): SupervisorLogger {
  const debug = (obj: object, msg: string): void => logger.debug({ sandboxId, ...obj }, msg);
  const warn = (obj: object, msg: string): void => logger.warn({ sandboxId, ...obj }, msg);
  return { trace: debug, debug, info: debug, warn, error: warn, fatal: warn };
}

/** What is kept either way when the view cannot be served: the delta holds every write the worker took. */
const KEPT = 'nothing written to the delta is lost; attach the sandbox again to get its view back';

export class SupervisedView {
  #restarts = 0;
  #lastRestartReason: string | undefined;
  #failedReason: string | undefined;
  /** Set once the first view is in the container: from then on a replacement's view is put back. */
  #containerPid: number | undefined;
  #supervisor: WorkerSupervisor | undefined;

  private constructor(
    private readonly paths: SandboxPaths,
    private readonly onViewReplaced: () => void,
  ) {}

  /** Mounts the view on the host (paths.view) with a supervised worker; the container gets it later. */
  static async start(options: {
    readonly sandboxId: string;
    readonly paths: SandboxPaths;
    readonly mount: MountParams;
    /** The first worker (taken early, so its spawn overlaps the attach's other steps). */
    readonly first: Promise<WorkerHandle>;
    /** Where each replacement comes from (the node's pool). */
    readonly takeWorker: () => Promise<WorkerHandle>;
    readonly cgroup: Promise<WorkerCgroup | null>;
    readonly logger: RuntimeLogger;
    readonly onAudit: (events: readonly AuditEvent[]) => void;
    /** A replacement's view is back in the container. */
    readonly onViewReplaced: () => void;
  }): Promise<SupervisedView> {
    const view = new SupervisedView(options.paths, options.onViewReplaced);
    let first: Promise<WorkerHandle> | undefined = options.first;
    view.#supervisor = await WorkerSupervisor.start({
      sandboxId: options.sandboxId,
      mount: options.mount,
      logFile: options.paths.workerLog,
      logger: supervisorLogger(options.logger, options.sandboxId),
      spawn: () => {
        const taken = first ?? options.takeWorker();
        first = undefined;
        return taken;
      },
      cgroup: options.cgroup,
      onAudit: options.onAudit,
      onWorker: (pid) => view.#served(pid),
      onRestart: (reason) => {
        view.#restarts++;
        view.#lastRestartReason = reason;
      },
      onFatal: (reason) => {
        view.#failedReason = `its worker failed too often and was not restarted (${reason}): ${KEPT}`;
      },
    });
    return view;
  }

  /** The first view is attached in the container of `pid`: replacements are put back there. */
  inContainer(pid: number): void {
    this.#containerPid = pid;
  }

  /** The view is being taken out of the container (detach): a replacement under way is not put back. */
  leaveContainer(): void {
    this.#containerPid = undefined;
  }

  get supervisor(): WorkerSupervisor {
    return this.#supervisor!;
  }

  get status(): WorkerStatus {
    const state =
      this.#failedReason !== undefined ? 'failed' : this.supervisor.restarting ? 'restarting' : 'running';
    return {
      state,
      restarts: this.#restarts,
      ...(this.#lastRestartReason === undefined ? {} : { lastRestartReason: this.#lastRestartReason }),
      ...(this.#failedReason === undefined ? {} : { failedReason: this.#failedReason }),
    };
  }

  /** Unmounts and ends the worker; the host mountpoint is clear afterwards. */
  stop(): Promise<void> {
    return this.supervisor.stop();
  }

  /**
   * A worker mounted the view (the first, or a replacement before supervision hands it calls): the pid
   * file the clean-up on start reads names it, and a replacement's view goes where the container sees
   * it. Never throws: a view that cannot be put back marks the sandbox failed instead.
   */
  async #served(pid: number): Promise<void> {
    await writeFile(this.paths.workerPid, `${pid} ${processStartTime(pid) ?? ''}\n`, { mode: 0o600 }).catch(
      () => undefined,
    );
    const containerPid = this.#containerPid;
    if (containerPid === undefined) return;
    try {
      await detachInContainer({ pid: containerPid, name: WORKSPACE_NAME });
      await attachInContainer({
        pid: containerPid,
        source: this.paths.view,
        name: WORKSPACE_NAME,
        readonly: false,
      });
      this.onViewReplaced();
    } catch (err) {
      this.#failedReason =
        `its worker was restarted but the view could not be put back in the container ` +
        `(${(err as Error).message}): ${KEPT}`;
    }
  }
}
