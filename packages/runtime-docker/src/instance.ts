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
import { StopGate, execIo, validateEnv, validateTimeoutMs } from '@agentfense/protocol';
import type { LauncherClient } from '@agentfense/launcher';
import { WORKSPACE_DIR, buildExecArgs } from './exec/args.js';
import type { EngineApi } from './engine/api.js';
import { buildExecBody, buildKillBody } from './engine/bodies.js';
import { maskArgv } from './exec/audit.js';
import type { ContainerCgroup } from './container/cgroup.js';
import { apiError } from './engine/engine-errors.js';
import { EngineApiError } from './engine/api.js';
import { runExec } from './exec/exec.js';
import { launchExec } from './exec/launch.js';
import type { LaunchedExec } from './exec/launch.js';
import type { RuntimeLogger } from './logger.js';
import type { WorkspaceRelay } from './container/relay.js';
import { runSpawn } from './exec/spawn.js';
import { runInitExec } from './launcher/exec.js';
import type { LauncherListener } from './launcher/launcher.js';

/** How long a forced removal may take before stop() reports the engine as unresponsive. */
const REMOVE_TIMEOUT_MS = 60_000;
/** How long each command's stream gets to end after its container was removed before it is dropped. */
const STREAM_END_AFTER_REMOVE_MS = 5_000;

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
  readonly api: EngineApi;
  /** uid:gid of the container's processes. */
  readonly user: string;
  /** The sandbox-wide environment (validated; in the container's config, or in execEnv). */
  readonly env: Readonly<Record<string, string>>;
  /**
   * Environment every command gets on top of the container's: the sandbox env for a pooled container
   * (created before its sandbox was known), nothing for a fresh one (its config holds the env).
   */
  readonly execEnv?: Readonly<Record<string, string>>;
  readonly limits: EnforcedLimits;
  /** `docker run` arguments that created the container (for audit records). */
  readonly runArgs: readonly string[];
  /** Host paths masked in audit records. */
  readonly placeholders: readonly PathPlaceholder[];
  /** The container's cgroups seen from the host (resolved in the background at start). */
  readonly cgroup: Promise<ContainerCgroup | null>;
  readonly maxOutputBytes: number;
  readonly logger: RuntimeLogger;
  /**
   * The container's af-init connection (launcher.ts) and the environment commands start from; absent or
   * dead (or the cgroup not visible, which kills need), commands go through engine execs.
   */
  readonly launcher?: {
    readonly listener: LauncherListener;
    readonly client: LauncherClient;
    readonly env: Readonly<Record<string, string>>;
  };
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
  readonly #gate: StopGate;
  /** The launcher's loss was logged. */
  #initLost = false;

  constructor(options: DockerInstanceOptions) {
    this.#options = options;
    this.sandboxId = options.sandboxId;
    this.limits = options.limits;
    this.#gate = new StopGate(options.sandboxId);
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
    this.#gate.assertRunning();
    validateTimeoutMs(options.timeoutMs);
    const io = execIo(options);
    const { body, audit } = this.#prepare({
      command: options.command,
      env: options.env,
      cwd: options.cwd,
      interactive: io.stdin !== undefined,
    });
    const o = this.#options;
    const init = await this.#viaInit();
    if (init !== null) {
      return this.#gate.unlessStopped(
        runInitExec({
          client: init.client,
          argv: typeof options.command === 'string' ? ['/bin/sh', '-c', options.command] : options.command,
          cwd: body.WorkingDir ?? WORKSPACE_DIR,
          env: { ...init.env, ...envOf(body.Env ?? []) },
          audit,
          maxOutputBytes: o.maxOutputBytes,
          cgroup: init.cgroup,
          watchOom: this.limits.memoryBytes !== null,
          logger: o.logger,
          stopped: () => this.#gate.stopped,
          ...io,
        }),
      );
    }
    return this.#gate.unlessStopped(
      runExec({
        ...this.#launchBase(),
        body,
        audit,
        image: o.image,
        maxOutputBytes: o.maxOutputBytes,
        cgroup: o.cgroup,
        watchOom: this.limits.memoryBytes !== null,
        ...io,
      }),
    );
  }

  async spawn(options: SpawnOptions): Promise<SandboxProcess> {
    this.#gate.assertRunning();
    const { body, audit } = this.#prepare({
      command: options.argv,
      env: options.env,
      cwd: options.cwd,
      interactive: true,
    });
    return this.#gate.unlessStopped(
      runSpawn({ ...this.#launchBase(), body, audit, image: this.#options.image }),
    );
  }

  /** af-init's connection, if commands can go through it: alive, and the cgroup visible for kills. */
  async #viaInit(): Promise<{
    client: LauncherClient;
    cgroup: ContainerCgroup;
    env: Readonly<Record<string, string>>;
  } | null> {
    const launcher = this.#options.launcher;
    if (launcher === undefined) return null;
    const cgroup = await this.#options.cgroup;
    if (cgroup === null) return null;
    if (!launcher.client.alive) {
      if (!this.#initLost) {
        this.#initLost = true;
        this.#options.logger.warn(
          { sandboxId: this.sandboxId },
          "the container's launcher is gone: commands fall back to engine execs",
        );
      }
      return null;
    }
    return { client: launcher.client, cgroup, env: launcher.env };
  }

  /** Whether af-init's connection keeps this process alive (a sandbox started ahead and idle need not). */
  keepProcessAlive(keep: boolean): void {
    this.#options.launcher?.client.keepProcessAlive(keep);
  }

  stop(): Promise<void> {
    return this.#gate.stop(() => this.#teardown());
  }

  #launchBase(): {
    api: EngineApi;
    containerId: string;
    logger: RuntimeLogger;
    killSession: (sessionId: number) => Promise<void>;
    onSpawned: (launched: LaunchedExec) => void;
  } {
    return {
      api: this.#options.api,
      containerId: this.#options.containerId,
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
  }): { body: ReturnType<typeof buildExecBody>; audit: ExecAudit } {
    const o = this.#options;
    const env = { ...o.execEnv, ...validateEnv(command.env ?? {}) };
    const spec = {
      env,
      command: command.command,
      interactive: command.interactive,
      user: o.user,
      ...(command.cwd === undefined ? {} : { cwd: command.cwd }),
    };
    const body = buildExecBody(spec);
    // The audit record says it in the docker CLI's words (what an operator would type to reproduce it).
    const args = buildExecArgs({ ...spec, container: o.containerId });
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
    return { body, audit };
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
    try {
      const kill = await launchExec({
        api: o.api,
        containerId: o.containerId,
        body: buildKillBody(sessionId, o.user),
        mode: 'exec',
        killSession: () => Promise.resolve(),
        logger: o.logger,
      });
      kill.stdout.resume();
      kill.stderr.resume();
      if ((await kill.exitCode) !== 0) throw new Error('the kill script gave up');
    } catch (err) {
      if (!this.#gate.stopped) {
        o.logger.warn(
          { sandboxId: this.sandboxId, sessionId, err },
          'could not kill a command session inside the container',
        );
      }
    }
  }

  #track(launched: LaunchedExec): void {
    this.#live.add(launched);
    void launched.exited.then(() => this.#live.delete(launched));
  }

  async #teardown(): Promise<void> {
    const o = this.#options;
    // Removing the container SIGKILLs every process in it; each exec stream then ends.
    await removeContainer(o.api, o.containerId);
    await o.launcher?.listener.release();
    await o.relay.release();
    const live = [...this.#live];
    await Promise.all(
      live.map(async (launched) => {
        const gone = await Promise.race([
          launched.exited.then(() => true),
          new Promise<boolean>((resolve) =>
            setTimeout(() => resolve(false), STREAM_END_AFTER_REMOVE_MS).unref(),
          ),
        ]);
        if (!gone) {
          launched.abandon();
          await launched.exited;
        }
      }),
    );
    o.logger.debug({ sandboxId: this.sandboxId }, 'sandbox stopped');
  }
}

/** `K=V` entries (validated by buildExecBody) as a record. */
function envOf(entries: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

/**
 * Force-removes a container (SIGKILL to everything in it, then removal, anonymous volumes too) and checks
 * it is gone. "No such container" is success: stop() and recovery are idempotent.
 */
export async function removeContainer(api: EngineApi, containerId: string): Promise<void> {
  const context = { action: 'removing the sandbox container', cli: api };
  try {
    await api.request('DELETE', `/containers/${containerId}`, {
      query: { force: true, v: true },
      timeoutMs: REMOVE_TIMEOUT_MS,
    });
  } catch (err) {
    if (!(err instanceof EngineApiError && err.status === 404)) throw apiError(err, context);
  }
}
