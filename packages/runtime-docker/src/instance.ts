// A started docker sandbox: one long-lived container; builds each command's `docker exec` argv, runs it,
// tracks live commands, kills command sessions, and removes the container on stop().
import type {
  EnforcedLimits,
  ExecAudit,
  ExecOptions,
  ExecResult,
  RuntimeInstance,
  PathPlaceholder,
  SandboxProcess,
  SpawnOptions,
} from '@agentfense/protocol';
import { WrongStateError, validateEnv, validateTimeoutMs } from '@agentfense/protocol';
import { buildExecArgs, buildKillArgs } from './args.js';
import { maskArgv } from './audit.js';
import type { ContainerCgroup } from './cgroup.js';
import { engineError, runDocker } from './engine.js';
import type { DockerCli } from './engine.js';
import { runExec } from './exec.js';
import type { LaunchedExec } from './launch.js';
import type { RuntimeLogger } from './logger.js';
import type { WorkspaceRelay } from './relay.js';
import { runSpawn } from './spawn.js';

/** How long the in-container kill script may take (it normally takes one `docker exec`, ~50-100 ms). */
const KILL_EXEC_TIMEOUT_MS = 30_000;
/** How long `docker rm --force` may take before stop() reports the engine as unresponsive. */
const REMOVE_TIMEOUT_MS = 60_000;
/** How long each command's CLI gets to exit after its container was removed before it is SIGKILLed. */
const CLI_EXIT_AFTER_REMOVE_MS = 5_000;

export interface DockerInstanceOptions {
  readonly sandboxId: string;
  /**
   * The container's id: every later command addresses the container by id, never by name, so an instance
   * whose container was replaced (same sandbox id, after a crash) can never reach the new one.
   */
  readonly containerId: string;
  /** The workspace relay (relay.ts), released after the container is removed. */
  readonly relay: WorkspaceRelay;
  readonly image: string;
  readonly cli: DockerCli;
  /** The sandbox-wide environment (validated; already in the container's config). */
  readonly env: Readonly<Record<string, string>>;
  readonly limits: EnforcedLimits;
  /** `docker run` arguments that created the container (for audit records). */
  readonly runArgs: readonly string[];
  /** Host paths masked in audit records. */
  readonly placeholders: readonly PathPlaceholder[];
  /** The container's cgroups seen from the host (resolved in the background at start). */
  readonly cgroup: Promise<ContainerCgroup | null>;
  readonly maxOutputBytes: number;
  readonly logger: RuntimeLogger;
}

/** Implements RuntimeInstance for docker; create it through `createDockerRuntime().start()`. */
export class DockerInstance implements RuntimeInstance {
  readonly sandboxId: string;
  readonly limits: EnforcedLimits;
  readonly #options: DockerInstanceOptions;
  /** The container's creation, as the first half of every audit argv. */
  readonly #auditRun: readonly string[];
  /** Every `docker exec` still running, so stop() can wait for them. */
  readonly #live = new Set<LaunchedExec>();
  #stopped: Promise<void> | undefined;

  constructor(options: DockerInstanceOptions) {
    this.#options = options;
    this.sandboxId = options.sandboxId;
    this.limits = options.limits;
    this.#auditRun = [
      'docker',
      ...maskArgv({
        argv: options.runArgs,
        placeholders: options.placeholders,
        redactEnv: new Set(Object.keys(options.env)),
      }),
    ];
  }

  async exec(options: ExecOptions): Promise<ExecResult> {
    this.#assertRunning();
    validateTimeoutMs(options.timeoutMs);
    const stdin = typeof options.stdin === 'string' ? Buffer.from(options.stdin) : options.stdin;
    const { args, audit } = this.#prepare({
      command: options.command,
      env: options.env,
      cwd: options.cwd,
      interactive: stdin !== undefined,
    });
    const o = this.#options;
    return this.#unlessStopped(
      runExec({
        ...this.#launchBase(),
        args,
        audit,
        image: o.image,
        maxOutputBytes: o.maxOutputBytes,
        cgroup: o.cgroup,
        watchOom: this.limits.memoryBytes !== null,
        ...(stdin === undefined ? {} : { stdin }),
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        ...(options.onStdout === undefined ? {} : { onStdout: options.onStdout }),
        ...(options.onStderr === undefined ? {} : { onStderr: options.onStderr }),
      }),
    );
  }

  async spawn(options: SpawnOptions): Promise<SandboxProcess> {
    this.#assertRunning();
    const { args, audit } = this.#prepare({
      command: options.argv,
      env: options.env,
      cwd: options.cwd,
      interactive: true,
    });
    return this.#unlessStopped(runSpawn({ ...this.#launchBase(), args, audit, image: this.#options.image }));
  }

  stop(): Promise<void> {
    this.#stopped ??= this.#teardown();
    return this.#stopped;
  }

  /** A command that fails because stop() removed the container under it reports the stop. */
  async #unlessStopped<T>(started: Promise<T>): Promise<T> {
    try {
      return await started;
    } catch (err) {
      if (this.#stopped !== undefined) {
        throw new WrongStateError(`sandbox ${this.sandboxId} was stopped while the command was starting`, {
          cause: err,
        });
      }
      throw err;
    }
  }

  #assertRunning(): void {
    if (this.#stopped !== undefined) throw new WrongStateError(`sandbox ${this.sandboxId} is stopped`);
  }

  #launchBase(): {
    cli: DockerCli;
    logger: RuntimeLogger;
    killSession: (sessionId: number) => Promise<void>;
    onSpawned: (launched: LaunchedExec) => void;
  } {
    return {
      cli: this.#options.cli,
      logger: this.#options.logger,
      killSession: (sessionId) => this.#killSession(sessionId),
      onSpawned: (launched) => this.#track(launched),
    };
  }

  #prepare(command: {
    command: string | readonly string[];
    env: Readonly<Record<string, string>> | undefined;
    cwd: string | undefined;
    interactive: boolean;
  }): { args: string[]; audit: ExecAudit } {
    const o = this.#options;
    const env = validateEnv(command.env ?? {});
    const args = buildExecArgs({
      container: o.containerId,
      env,
      command: command.command,
      interactive: command.interactive,
      ...(command.cwd === undefined ? {} : { cwd: command.cwd }),
    });
    const audit: ExecAudit = {
      runtime: 'docker',
      // How it ran: the container it ran in (created once per sandbox), then the exec itself.
      argv: [
        ...this.#auditRun,
        '&&',
        'docker',
        ...maskArgv({
          argv: args,
          placeholders: o.placeholders,
          redactEnv: new Set([...Object.keys(o.env), ...Object.keys(env)]),
        }),
      ],
      limits: this.limits,
    };
    return { args, audit };
  }

  /**
   * Kills a command's session: from the host through the container's cgroup when it is visible (fast, and
   * works when the pids limit leaves no room for another process), else with a kill script run in the
   * container.
   */
  async #killSession(sessionId: number): Promise<void> {
    const o = this.#options;
    const cgroup = await o.cgroup;
    if (cgroup !== null && (await cgroup.killSession(sessionId))) return;
    const result = await runDocker(o.cli, buildKillArgs(o.containerId, sessionId), {
      timeoutMs: KILL_EXEC_TIMEOUT_MS,
    });
    if (result.failed && this.#stopped === undefined) {
      o.logger.warn(
        { sandboxId: this.sandboxId, sessionId, stderr: result.stderr },
        'could not kill a command session inside the container',
      );
    }
  }

  #track(launched: LaunchedExec): void {
    this.#live.add(launched);
    void launched.exited.then(() => this.#live.delete(launched));
  }

  async #teardown(): Promise<void> {
    const o = this.#options;
    // Removing the container SIGKILLs every process in it; each `docker exec` client then exits.
    const removed = await runDocker(o.cli, ['rm', '--force', '--volumes', o.containerId], {
      timeoutMs: REMOVE_TIMEOUT_MS,
    });
    if (removed.failed && !/No such container/i.test(removed.stderr)) {
      throw engineError(removed.stderr, { action: 'removing the sandbox container', cli: o.cli });
    }
    await o.relay.release();
    const live = [...this.#live];
    await Promise.all(
      live.map(async (launched) => {
        const gone = await Promise.race([
          launched.exited.then(() => true),
          new Promise<boolean>((resolve) =>
            setTimeout(() => resolve(false), CLI_EXIT_AFTER_REMOVE_MS).unref(),
          ),
        ]);
        if (!gone) {
          launched.subprocess.kill('SIGKILL');
          await launched.exited;
        }
      }),
    );
    o.logger.debug({ sandboxId: this.sandboxId }, 'sandbox stopped');
  }
}
