// A started bwrap sandbox: builds each command's argv, runs it, tracks live processes, and tears down.
import { rm } from 'node:fs/promises';
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
import { BASE_ENV, WORKSPACE_DIR, buildBwrapArgs, commandArgv } from './exec/args.js';
import type { SystemMount } from './exec/args.js';
import { maskArgv } from './exec/audit.js';
import type { SandboxCgroup } from './cgroups/types.js';
import { runExec } from './exec/exec.js';
import type { SandboxLauncher } from './launcher/launcher.js';
import { runLauncherExec } from './launcher/exec.js';
import { HANDSHAKE_FDS, SECCOMP_FD } from './exec/launch.js';
import type { LaunchedBwrap, NetnsJoin } from './exec/launch.js';
import type { RuntimeLogger } from './logger.js';
import { ANCHOR_TRIES } from './sandbox-fs/relay.js';
import type { WorkspaceAnchor } from './sandbox-fs/relay.js';
import { runSpawn } from './exec/spawn.js';

export interface BwrapInstanceOptions {
  readonly sandboxId: string;
  readonly bwrapPath: string;
  readonly workspaceHostPath: string;
  /** The sandbox's own network namespace (a network policy); absent: a fresh one per bwrap. */
  readonly netns?: NetnsJoin | undefined;
  /** The sandbox-wide environment (validated). */
  readonly env: Readonly<Record<string, string>>;
  readonly systemMounts: readonly SystemMount[];
  readonly cgroup: SandboxCgroup | null;
  readonly limits: EnforcedLimits;
  /** Host paths masked in audit records. */
  readonly placeholders: readonly PathPlaceholder[];
  /** Runtime-owned scratch directory, removed by stop(). */
  readonly scratchDir: string;
  /** leftovers.ts's RUNNING_MARK: removed by stop() once nothing of the sandbox can run any more. */
  readonly runningMark: string;
  /** Per-stream cap of exec output. */
  readonly maxOutputBytes: number;
  /** The host uid/gid bwrap runs as (the sandbox user); null: this process's own. */
  readonly identity: { readonly uid: number; readonly gid: number } | null;
  /** The compiled seccomp deny list. */
  readonly seccomp: Buffer | null;
  /** Size of /tmp (bytes); absent: the kernel's default. */
  readonly tmpBytes?: number | undefined;
  /** The sandbox's own devpts on the host (devpts.ts); absent: bwrap's own, unbounded. */
  readonly devptsHostPath?: string | undefined;
  /**
   * Makes the anchor a long-lived process (spawn) binds under the workspace so it follows a remounted
   * worker (relay.ts); absent: spawned processes bind the workspace only, as commands do.
   */
  readonly createAnchor?: (() => Promise<WorkspaceAnchor>) | undefined;
  /**
   * The sandbox's launcher (launcher.ts): exec goes through it instead of a bwrap per command. Absent: a
   * bwrap per command. spawn() (sessions) always gets a bwrap of its own.
   */
  readonly launcher?: SandboxLauncher | undefined;
  /** Called at the end of stop() (e.g. the workspace relay's removal). */
  readonly onStop?: (() => Promise<void>) | undefined;
  readonly logger: RuntimeLogger;
}

/** Implements RuntimeInstance for bwrap; create it through `createBwrapRuntime().start()`. */
export class BwrapInstance implements RuntimeInstance {
  readonly sandboxId: string;
  readonly limits: EnforcedLimits;
  readonly #options: BwrapInstanceOptions;
  /** Every bwrap process still running, so stop() can kill them. */
  readonly #live = new Set<LaunchedBwrap>();
  readonly #gate: StopGate;

  constructor(options: BwrapInstanceOptions) {
    this.#options = options;
    this.sandboxId = options.sandboxId;
    this.limits = options.limits;
    this.#gate = new StopGate(options.sandboxId);
  }

  async exec(options: ExecOptions): Promise<ExecResult> {
    this.#gate.assertRunning();
    validateTimeoutMs(options.timeoutMs);
    const { args, commandArgc, audit } = this.#prepare({
      command: options.command,
      env: options.env,
      cwd: options.cwd,
    });
    const launcher = this.#options.launcher;
    if (launcher !== undefined) {
      // #prepare validated command, env and cwd; the audit shows the bwrap the command runs under.
      return this.#gate.unlessStopped(
        runLauncherExec({
          launcher,
          argv: commandArgv(options.command),
          cwd: options.cwd ?? WORKSPACE_DIR,
          env: { ...BASE_ENV, ...this.#options.env, ...options.env },
          cgroup: this.#options.cgroup,
          maxOutputBytes: this.#options.maxOutputBytes,
          audit,
          logger: this.#options.logger,
          ...execIo(options),
        }),
      );
    }
    return this.#gate.unlessStopped(
      runExec({
        ...this.#launchBase(),
        args,
        commandArgc,
        audit,
        maxOutputBytes: this.#options.maxOutputBytes,
        ...execIo(options),
      }),
    );
  }

  async spawn(options: SpawnOptions): Promise<SandboxProcess> {
    this.#gate.assertRunning();
    // A launch during which the worker remounted binds that mount instead of the anchor's bare directory
    // (relay.ts sitsOnAnchor) and would not follow the next restart: made again, like the launcher's.
    for (let attempt = 1; ; attempt++) {
      const launched = await this.#spawnOverAnchor(options, attempt < ANCHOR_TRIES);
      if (launched !== null) return launched;
    }
  }

  async #spawnOverAnchor(options: SpawnOptions, checkAnchor: boolean): Promise<SandboxProcess | null> {
    const anchor = await this.#options.createAnchor?.();
    try {
      const { args, commandArgc, audit } = this.#prepare({
        command: options.argv,
        env: options.env,
        cwd: options.cwd,
        ...(anchor === undefined ? {} : { anchor: anchor.source }),
      });
      const launched = await this.#gate.unlessStopped(
        runSpawn({
          ...this.#launchBase(),
          args,
          commandArgc,
          audit,
          checkAnchor: checkAnchor && anchor !== undefined,
        }),
      );
      if (launched === null) {
        await anchor?.release();
        return null;
      }
      // The anchor lives as long as the process; stop() and recovery remove any left (clearRelay).
      if (anchor !== undefined) {
        void launched
          .wait()
          .then(() => anchor.release())
          .catch((err: unknown) => this.#options.logger.warn({ err }, 'could not remove an anchor'));
      }
      return launched;
    } catch (err) {
      await anchor?.release();
      throw err;
    }
  }

  stop(): Promise<void> {
    return this.#gate.stop(() => this.#teardown());
  }

  /** Whether the launcher keeps this process alive (a sandbox started ahead and idle need not). */
  keepProcessAlive(keep: boolean): void {
    this.#options.launcher?.keepProcessAlive(keep);
  }

  #launchBase(): {
    bwrapPath: string;
    netns: NetnsJoin | undefined;
    identity: BwrapInstanceOptions['identity'];
    seccomp: Buffer | null;
    cgroup: SandboxCgroup | null;
    logger: RuntimeLogger;
    onSpawned: (launched: LaunchedBwrap) => void;
  } {
    return {
      bwrapPath: this.#options.bwrapPath,
      netns: this.#options.netns,
      identity: this.#options.identity,
      seccomp: this.#options.seccomp,
      cgroup: this.#options.cgroup,
      logger: this.#options.logger,
      onSpawned: (launched) => this.#track(launched),
    };
  }

  #prepare(command: {
    command: string | readonly string[];
    env: Readonly<Record<string, string>> | undefined;
    cwd: string | undefined;
    anchor?: string;
  }): { args: string[]; commandArgc: number; audit: ExecAudit } {
    const o = this.#options;
    const execEnv = validateEnv(command.env ?? {});
    const env = { ...o.env, ...execEnv };
    const args = buildBwrapArgs({
      workspaceHostPath: o.workspaceHostPath,
      ...(command.anchor === undefined ? {} : { workspaceAnchor: command.anchor }),
      systemMounts: o.systemMounts,
      joinsNetns: o.netns !== undefined,
      env,
      command: command.command,
      ...(command.cwd === undefined ? {} : { cwd: command.cwd }),
      ...(o.cgroup === null ? { infoFd: HANDSHAKE_FDS.infoFd } : { cgroupHandshake: HANDSHAKE_FDS }),
      ...(o.tmpBytes === undefined ? {} : { tmpBytes: o.tmpBytes }),
      ...(o.devptsHostPath === undefined ? {} : { devptsHostPath: o.devptsHostPath }),
      ...(o.seccomp === null ? {} : { seccompFd: SECCOMP_FD }),
    });
    const audit: ExecAudit = {
      runtime: 'bwrap',
      argv: [
        'bwrap',
        ...maskArgv({
          argv: args,
          placeholders:
            command.anchor === undefined
              ? o.placeholders
              : [...o.placeholders, { hostPath: command.anchor, placeholder: '<workspace-anchor>' }],
          redactEnv: new Set(Object.keys(env)),
        }),
      ],
      limits: this.limits,
    };
    return { args, commandArgc: commandArgv(command.command).length, audit };
  }

  #track(launched: LaunchedBwrap): void {
    this.#live.add(launched);
    // reject: false, so this never rejects; `finally` keeps the set exact.
    void launched.subprocess.finally(() => this.#live.delete(launched));
  }

  async #teardown(): Promise<void> {
    const { logger, cgroup, scratchDir, runningMark } = this.#options;
    // Terminating each command kills its pid namespace (launch.ts); the cgroup teardown then catches
    // anything that could have escaped the tree, and removes the cgroups.
    const live = [...this.#live];
    await Promise.all([
      this.#options.launcher?.stop(),
      ...live.map((launched) => launched.terminate('kill')),
    ]);
    await Promise.all(live.map((launched) => launched.subprocess));
    await cgroup?.destroy();
    await this.#options.onStop?.();
    await rm(scratchDir, { recursive: true, force: true });
    // Last: a stop that failed above leaves it, so recovery still searches for processes.
    await rm(runningMark, { force: true });
    logger.debug({ sandboxId: this.sandboxId }, 'sandbox stopped');
  }
}
