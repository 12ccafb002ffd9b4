// The per-sandbox launcher: ONE long-lived bwrap per sandbox whose command is af-init (the static launcher
// of @agentfense/protocol, wire protocol in its client), so each exec costs a SPAWN request and a
// fork+exec inside the sandbox instead of a new bwrap (mounts, namespaces, the seccomp filter's load, the
// cgroup move: ~1.3-1.6× a bare bwrap before anything of ours, control bench README).
//
// What each command still gets, and from where:
// - namespaces, mounts, uid 1000, no capabilities, --disable-userns, the seccomp filter and the cgroups:
//   inherited from af-init, which bwrap set up exactly as for a per-exec bwrap (buildBwrapArgs, the
//   same cgroup handshake: af-init is in the sandbox's cgroups before it runs, so every command is too);
// - its environment and cwd: from the SPAWN request (af-init adds nothing; its own environment is only
//   BASE_ENV, so /proc/1/environ holds no sandbox variable);
// - a new session (setsid) and only fds 0-2: af-init's duty;
// - the end of everything it started: process-tree.ts (host side, from /proc).
// af-init runs as the namespace's pid 1 (`--as-pid-1`): commands cannot SIGKILL/SIGSTOP it, and it reaps
// every orphan. Its binary is copied in (`--ro-bind-data`), so no host path of it shows inside.
//
// The workspace is bound over an anchor (relay.ts), like a session's shell, so a worker restarted under a
// running launcher shows through: the host's unmount of the dead mount and the new worker's mount both
// propagate in. A launch that missed its anchor (the worker mounted during it) is made again (#start).
// A launcher that died (OOM-killed, killed from the host) is replaced on the next exec; commands it was
// running end as killed.
import { closeSync, openSync } from 'node:fs';
import { LauncherClient } from '@agentfense/launcher';
import type { LauncherCommand, LauncherSpawnOptions } from '@agentfense/launcher';
import { InternalError, processStartTime } from '@agentfense/protocol';
import type { SandboxCgroup } from '../cgroups/types.js';
import { launchBwrap } from '../exec/launch.js';
import type { LaunchedBwrap, NetnsJoin } from '../exec/launch.js';
import { hostProcessView, killLeftovers, type ProcessView } from './process-tree.js';
import type { RuntimeLogger } from '../logger.js';
import { ANCHOR_TRIES, sitsOnAnchor } from '../sandbox-fs/relay.js';
import type { WorkspaceAnchor } from '../sandbox-fs/relay.js';

/** How long af-init gets to report a command we killed before the launcher itself is killed. */
const WEDGED_MS = 3_000;

/** Where af-init's binary appears inside the sandbox (a read-only copy, mode 0555). */
export const AF_INIT_DEST = '/.agentfense/af-init';
/** af-init's connection: the first extra descriptor after bwrap's seccomp fd (a socketpair end). */
export const LAUNCHER_CONNECTION_FD = 7;
/** The fd bwrap copies af-init's binary from (`--ro-bind-data`). */
export const LAUNCHER_BINARY_FD = 8;

export interface SandboxLauncherOptions {
  readonly sandboxId: string;
  readonly bwrapPath: string;
  /** The sandbox's own network namespace, which af-init and so every command runs in. */
  readonly netns?: NetnsJoin | undefined;
  /** The host path of the af-init binary. */
  readonly afInitPath: string;
  readonly identity: { readonly uid: number; readonly gid: number } | null;
  readonly seccomp: Buffer | null;
  readonly cgroup: SandboxCgroup | null;
  /**
   * bwrap's arguments running `AF_INIT_DEST --fd LAUNCHER_CONNECTION_FD`, over `anchor` when given, with
   * the workspace bound on top only when `mounted` (see BwrapSpec.workspaceOverAnchor).
   */
  readonly args: (anchor: string | undefined, mounted: boolean) => string[];
  /** Whether the worker's mount is at the workspace path now (asked after the anchor exists). */
  readonly workspaceMounted: () => Promise<boolean>;
  /** The anchor the workspace is bound over (relay.ts); absent: none (the launcher then keeps a dead mount). */
  readonly createAnchor?: (() => Promise<WorkspaceAnchor>) | undefined;
  readonly logger: RuntimeLogger;
}

/** One started launcher. */
interface Running {
  readonly client: LauncherClient;
  readonly launched: LaunchedBwrap;
  readonly init: { pid: number; startTime: string | null };
  /** Session ids (pids in the namespace) of commands started and not yet swept after their end. */
  readonly live: Set<number>;
  /** Commands whose STARTED/FAILED has not come yet: a sweep waits for them (their pid is unknown). */
  readonly starting: Set<Promise<unknown>>;
  /** The sweep under way, if any: spawns wait for it, so no command starts while leftovers are killed. */
  sweeping: Promise<void> | undefined;
}

/** A command started through the launcher, with the one way to end its whole tree. */
export interface LauncherRun {
  readonly command: LauncherCommand;
  /**
   * Called once the command ended (after `done`): kills whatever it left in the namespace. Also safe to
   * call to terminate it early (SIGKILL to its group, then the same sweep).
   */
  finish(): Promise<void>;
  terminate(): Promise<void>;
}

export class SandboxLauncher {
  readonly #options: SandboxLauncherOptions;
  /** The sweep's view of the host: the sandbox's cgroups list its processes, when it has any. */
  readonly #processes: ProcessView;
  #current: Promise<Running> | undefined;
  #stopped = false;
  /** Whether the launcher keeps this process alive (false while its sandbox waits, idle, to be used). */
  #keepAlive = true;

  constructor(options: SandboxLauncherOptions) {
    this.#options = options;
    // Every process of the sandbox is in each of its cgroups (attach moves into all; forks inherit), so
    // one cgroup.procs lists them all: read synchronously, a few pids.
    const first = options.cgroup?.paths[0];
    this.#processes = hostProcessView(first === undefined ? undefined : `${first}/cgroup.procs`);
  }

  /** Starts a command (the launcher first, if none runs). Rejects with UnavailableError if it cannot. */
  async spawn(spec: LauncherSpawnOptions): Promise<LauncherRun> {
    const running = await this.#running();
    while (running.sweeping !== undefined) await running.sweeping;
    const command = running.client.spawn(spec);
    const pid = command.pid.then(
      (p) => {
        if (p !== null) running.live.add(p);
        return p;
      },
      () => null,
    );
    running.starting.add(pid);
    void pid.finally(() => running.starting.delete(pid));
    let swept: Promise<void> | undefined;
    const sweep = (): Promise<void> => {
      swept ??= (async () => {
        const p = await pid;
        if (p !== null) running.live.delete(p);
        await this.#sweep(running);
      })();
      return swept;
    };
    return {
      command,
      finish: sweep,
      terminate: async () => {
        // SIGKILL to its process group from inside is immediate; the sweep then takes what left the group.
        command.signal('SIGKILL');
        await sweep();
        // af-init reports the end once it reaped the command. If it does not (stopped or wedged: it is the
        // agent's uid), the whole launcher goes, so a timeout still ends the command; the next exec starts
        // a new one.
        let timer: NodeJS.Timeout | undefined;
        const answered = await Promise.race([
          command.done.then(
            () => true,
            () => true,
          ),
          new Promise<boolean>((resolve) => {
            timer = setTimeout(() => resolve(false), WEDGED_MS);
          }),
        ]);
        clearTimeout(timer);
        if (!answered) {
          this.#options.logger.warn(
            { sandboxId: this.#options.sandboxId },
            'af-init did not report a killed command; killing the launcher',
          );
          await running.launched.terminate('kill');
        }
      },
    };
  }

  /**
   * Starts the launcher ahead of the first exec (with the sandbox, while the worker mounts): a failure is
   * only logged, the first exec then tries again.
   */
  prestart(): void {
    this.#running().catch((err: unknown) =>
      this.#options.logger.debug({ err, sandboxId: this.#options.sandboxId }, 'launcher prestart failed'),
    );
  }

  /** Whether this launcher (and any started later) keeps this process's event loop alive; yes by default. */
  keepProcessAlive(keep: boolean): void {
    this.#keepAlive = keep;
    void this.#current?.then(
      (running) => running.launched.keepProcessAlive(keep),
      () => undefined,
    );
  }

  /** Kills af-init and with it the whole namespace (pid 1's death). Idempotent; no launcher starts after. */
  async stop(): Promise<void> {
    this.#stopped = true;
    const current = this.#current;
    this.#current = undefined;
    const running = await current?.catch(() => undefined);
    if (running === undefined) return;
    // SIGKILL first: a closed connection would make af-init kill everything too, but say so on stderr.
    await running.launched.terminate('kill');
    running.client.close();
    await running.launched.subprocess;
  }

  /** Kills leftovers, with spawns held until it is done. */
  async #sweep(running: Running): Promise<void> {
    while (running.sweeping !== undefined) await running.sweeping;
    const done = (async () => {
      // A command being started has no known session yet: its pid must be in `live` first.
      await Promise.all([...running.starting]);
      const ok = await killLeftovers(running.init, running.live, this.#processes);
      if (!ok)
        this.#options.logger.warn(
          { sandboxId: this.#options.sandboxId },
          'could not kill every leftover of a command',
        );
    })();
    running.sweeping = done;
    try {
      await done;
    } finally {
      running.sweeping = undefined;
    }
  }

  #running(): Promise<Running> {
    if (this.#stopped) return Promise.reject(new InternalError('the sandbox launcher was stopped'));
    const current = this.#current;
    if (current !== undefined) {
      return current.then((running) => (running.client.alive ? running : this.#restart(current)));
    }
    return this.#restart(undefined);
  }

  /** Starts a launcher unless another call already replaced `dead`. */
  #restart(dead: Promise<Running> | undefined): Promise<Running> {
    if (this.#current !== dead && this.#current !== undefined) return this.#running();
    const next = this.#start();
    this.#current = next;
    next.catch(() => {
      if (this.#current === next) this.#current = undefined;
    });
    return next;
  }

  /**
   * Starts a launcher that sits on its anchor's bare directory (relay.ts `sitsOnAnchor`): a worker that
   * mounted during the launch made bwrap bind its FUSE mount instead, which would never follow a restart,
   * so that launch is thrown away and made again. After ANCHOR_TRIES misses (a worker remounting
   * continuously) the last one is kept: it works until the next restart, and the miss is logged.
   */
  async #start(): Promise<Running> {
    for (let attempt = 1; ; attempt++) {
      const running = await this.#startOnce();
      if (running.anchored || attempt >= ANCHOR_TRIES) {
        if (!running.anchored)
          this.#options.logger.warn(
            { sandboxId: this.#options.sandboxId },
            'the launcher sits on the worker mount, not its anchor: it will not see the next worker restart',
          );
        return running;
      }
      this.#options.logger.debug({ sandboxId: this.#options.sandboxId }, 'launcher missed its anchor; again');
      running.client.close();
      await running.launched.terminate('kill');
      await running.launched.subprocess.catch(() => undefined);
    }
  }

  async #startOnce(): Promise<Running & { anchored: boolean }> {
    const o = this.#options;
    const anchor = await o.createAnchor?.();
    let launched: LaunchedBwrap | undefined;
    try {
      // The anchor is a slave of the workspace's parent from now on: a mount made after this point
      // propagates onto it (and into the sandbox); one made before must be bound on top, as a session's
      // shell does. Either way the mount present at launch is what /workspace shows.
      const mounted = await o.workspaceMounted();
      const binary = openSync(o.afInitPath, 'r');
      try {
        const log = (stream: string) => (chunk: Buffer) =>
          o.logger.warn(
            { sandboxId: o.sandboxId, [stream]: chunk.toString('utf8').slice(0, 4096) },
            'af-init said',
          );
        launched = await launchBwrap({
          bwrapPath: o.bwrapPath,
          netns: o.netns,
          args: o.args(anchor?.source, mounted || anchor === undefined),
          commandArgc: 3,
          identity: o.identity,
          seccomp: o.seccomp,
          cgroup: o.cgroup,
          mode: 'launcher',
          extraStdio: ['pipe', binary],
          logger: o.logger,
          onStdout: log('stdout'),
          onStderr: log('stderr'),
        });
      } finally {
        closeSync(binary);
      }
      const socket = launched.extra(0);
      if (socket === null) throw new InternalError('the launcher has no connection');
      const [client, pid] = await Promise.all([LauncherClient.connect(socket), launched.pid1]);
      const running: Running & { anchored: boolean } = {
        client,
        launched,
        init: { pid, startTime: processStartTime(pid) ?? null },
        // af-init is READY, so bwrap's mounts are all made: what /workspace sits on is settled.
        anchored: anchor === undefined || (await sitsOnAnchor(pid)),
        live: new Set(),
        starting: new Set(),
        sweeping: undefined,
      };
      // A launcher that dies (or whose connection breaks) takes its namespace with it.
      void client.closed.then(() => launched?.terminate('kill'));
      void launched.subprocess
        .then(async () => {
          client.close();
          await anchor?.release();
        })
        .catch((err: unknown) => o.logger.warn({ err }, 'could not remove the launcher anchor'));
      if (!this.#keepAlive) launched.keepProcessAlive(false);
      return running;
    } catch (err) {
      if (launched !== undefined) {
        await launched.terminate('kill');
        await launched.subprocess;
      }
      await anchor?.release();
      throw err;
    }
  }
}
