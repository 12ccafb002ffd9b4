// The bwrap SandboxRuntime: checks the host once, then starts sandboxes (scratch files, cgroups, argv).
import { mkdir, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { posix } from 'node:path';
import type { HostUser, RuntimeInstance, RuntimeStartOptions, SandboxRuntime } from '@agentfense/protocol';
import {
  InvalidArgumentError,
  NO_LIMITS,
  checkMaxOutputBytes,
  checkWorkspaceDir,
  findExecutable,
  UnavailableError,
  validateEnv,
  validateHostPath,
  validateSandboxId,
} from '@agentfense/protocol';
import { afInitPath } from '@agentfense/launcher';
import { checkFuseDevice, probeBwrap, resolveBwrapPath } from './host/check.js';
import { createSandboxCgroup, removeSandboxCgroups } from './cgroups/create.js';
import { detectCgroupHost } from '@agentfense/protocol';
import type { CgroupHost } from '@agentfense/protocol';
import type { SandboxCgroup } from './cgroups/types.js';
import { prepareSharedEtc } from './sandbox-fs/shared-etc.js';
import { probeCached, probeKey, recordProbe } from './host/host-cache.js';
import { RUNNING_MARK, killLeftovers, mayHaveProcesses, recordedUid } from './host/leftovers.js';
import { BwrapInstance } from './instance.js';
import { createStderrLogger } from './logger.js';
import type { RuntimeLogger } from './logger.js';
import { resolveSystemMounts } from './sandbox-fs/system-mounts.js';
import { clearRelay, createAnchor, createRelay, relayPath } from './sandbox-fs/relay.js';
import { clearDevpts, createDevpts } from './sandbox-fs/devpts.js';
import { clearSandboxFiles, writeSandboxFiles } from './sandbox-fs/sandbox-files.js';
import { resolveSandboxUser } from './host/sandbox-user.js';
import type { HostIdentity } from './host/sandbox-user.js';
import { loadSeccompFilter } from './exec/seccomp.js';
import {
  AF_INIT_DEST,
  LAUNCHER_BINARY_FD,
  LAUNCHER_CONNECTION_FD,
  SandboxLauncher,
} from './launcher/launcher.js';
import { buildBwrapArgs } from './exec/args.js';
import { HANDSHAKE_FDS, SECCOMP_FD } from './exec/launch.js';
import type { NetnsJoin } from './exec/launch.js';

/** Configuration of the bwrap runtime (all optional; defaults suit Debian 12 hosts). */
export interface BwrapRuntimeOptions {
  /** The bwrap executable; default: `bwrap` found on PATH or in /usr/bin. */
  readonly bwrapPath?: string;
  /** Read-only system directories; default DEFAULT_SYSTEM_DIRS. */
  readonly systemDirs?: readonly string[];
  /** Host /etc entries (relative to /etc) copied into the sandbox's /etc; default DEFAULT_ETC_ENTRIES. */
  readonly etcEntries?: readonly string[];
  /** Where cgroup hierarchies are mounted; default /sys/fs/cgroup. */
  readonly cgroupRoot?: string;
  /** Directory under each hierarchy's root for per-sandbox cgroups; default "agentfense". */
  readonly cgroupParent?: string;
  /** The control plane's data directory: shown as `<data>` in audit records. */
  readonly dataDir?: string;
  /** check() requires /dev/fuse (default true; the workspace is a FUSE mount). */
  readonly requireFuse?: boolean;
  /** Cap on each of stdout/stderr of `exec` (bytes; default 16 MiB, at most 32 MiB); exceeding it kills the command. */
  readonly maxOutputBytes?: number;
  /**
   * The unprivileged host user (name or uid) sandbox processes run as when this process is root; default
   * $AGENTFENSE_SANDBOX_USER, else `agentfense-sandbox` (created by scripts/setup). Never root.
   */
  readonly sandboxUser?: string | number;
  /**
   * A directory where each sandbox's user reaches its workspace and the shared /etc (the data directory
   * is private to root): root's, 0711; each sandbox's relay in it is root's with that sandbox's group,
   * 0710, so no other local user or sandbox passes through (run-dir.ts); default DEFAULT_RUN_DIR.
   */
  readonly runDir?: string;
  /**
   * Run each exec through a per-sandbox launcher (af-init as the pid 1 of one long-lived bwrap per sandbox,
   * launcher.ts) instead of a bwrap per command. Needs the sandbox user (root control plane: the workspace
   * anchor that survives a worker restart) and the built af-init; otherwise commands get a bwrap each.
   * Default on; `$AGENTFENSE_BWRAP_LAUNCHER=0` turns it off.
   */
  readonly execLauncher?: boolean;
  /** The libseccomp-based filter compiler; default the one scripts/setup builds in this package. */
  readonly seccompCompiler?: string;
  readonly logger?: RuntimeLogger;
}

/**
 * Default of BwrapRuntimeOptions.runDir. Not `/run/agentfense`, where versions before sandboxes had uids
 * of their own keep their relays in a directory closed to one shared group: a host running both (an
 * upgrade under way) would have each version set the other's mode.
 */
export const DEFAULT_RUN_DIR = '/run/agentfense-sandboxes';

/** Name of the runtime's scratch directory inside each sandbox's stateDir. */
const SCRATCH_DIR = 'bwrap';

/** True when `path` is the root of a mount other than its parent's (the worker's FUSE mount is there). */
async function isMountRoot(path: string): Promise<boolean> {
  const [self, parent] = await Promise.all([stat(path), stat(posix.dirname(path))]);
  return self.dev !== parent.dev;
}

/** Creates the bwrap runtime. Holds no global state: two runtimes are fully independent. */
export function createBwrapRuntime(options: BwrapRuntimeOptions = {}): SandboxRuntime {
  const logger = options.logger ?? createStderrLogger();
  const maxOutputBytes = checkMaxOutputBytes(options.maxOutputBytes);
  // The sandbox user is resolved now (the traits report it); a missing one fails check() and start().
  let identity: HostIdentity = null;
  let identityError: Error | undefined;
  try {
    identity = resolveSandboxUser(options.sandboxUser);
  } catch (err) {
    identityError = err as Error;
  }
  const runDir = identity === null ? undefined : (options.runDir ?? DEFAULT_RUN_DIR);
  const launcherWanted = options.execLauncher ?? process.env.AGENTFENSE_BWRAP_LAUNCHER !== '0';
  const seccompCacheDir =
    runDir ?? (options.dataDir === undefined ? tmpdir() : posix.join(options.dataDir, 'run'));

  // The successful check is cached (bwrap does not disappear under us); a failed one is retried next time,
  // so fixing the host does not need a restart.
  let checked: Promise<{ bwrapPath: string; seccomp: Buffer }> | undefined;
  const check = (): Promise<{ bwrapPath: string; seccomp: Buffer }> => {
    checked ??= (async () => {
      if (identityError !== undefined) throw identityError;
      const bwrapPath = await resolveBwrapPath(options.bwrapPath);
      // The probe (a sandbox of its own) runs once per host state, not once per process (host-cache.ts).
      const probeDir = options.dataDir === undefined ? undefined : posix.join(options.dataDir, 'run');
      const key = probeDir === undefined ? undefined : probeKey(bwrapPath);
      const probe = async (): Promise<void> => {
        if (probeDir === undefined || key === undefined || !(await probeCached(probeDir, key))) {
          await probeBwrap(bwrapPath, identity);
          if (probeDir !== undefined && key !== undefined) {
            await mkdir(probeDir, { recursive: true, mode: 0o700 });
            await recordProbe(probeDir, key);
          }
        }
      };
      const [seccomp] = await Promise.all([
        loadSeccompFilter({ compiler: options.seccompCompiler, cacheDir: seccompCacheDir }),
        probe(),
        options.requireFuse !== false ? checkFuseDevice() : Promise.resolve(),
      ]);
      return { bwrapPath, seccomp };
    })();
    // Not a swallowed error: callers still get the rejection; this only forgets it so the next call retries.
    checked.catch(() => {
      checked = undefined;
    });
    return checked;
  };

  // Host facts that do not change per sandbox, computed once (a failure is retried by the next start).
  const once = <T>(make: () => Promise<T>): (() => Promise<T>) => {
    let value: Promise<T> | undefined;
    return () => {
      value ??= make();
      value.catch(() => {
        value = undefined;
      });
      return value;
    };
  };
  const sharedEtc = once(() =>
    prepareSharedEtc({
      dataDir: options.dataDir,
      runDir,
      entries: options.etcEntries,
      logger,
    }),
  );
  const systemMountsOnce = once(async () =>
    resolveSystemMounts({
      etcDir: await sharedEtc(),
      ...(options.systemDirs === undefined ? {} : { systemDirs: options.systemDirs }),
    }),
  );
  const nsenterPath = once(async () => {
    const found = await findExecutable({ name: 'nsenter' });
    if (found === null) {
      throw new UnavailableError(
        'nsenter (util-linux) is needed for a sandbox with a network policy: install util-linux',
      );
    }
    return found;
  });
  const cgroupHost = once<CgroupHost>(() =>
    detectCgroupHost(options.cgroupRoot === undefined ? {} : { root: options.cgroupRoot }),
  );

  /** Who the sandbox runs as: its own user when the control plane leased one, else the shared one. */
  const sandboxIdentity = (user: HostUser | undefined): HostIdentity => {
    if (user === undefined) return identity;
    if (identity === null) {
      throw new InvalidArgumentError('a sandbox user of its own needs a control plane running as root');
    }
    for (const id of [user.uid, user.gid]) {
      if (!Number.isSafeInteger(id) || id <= 0 || id > 4_294_967_294) {
        throw new InvalidArgumentError(
          `user must be a numeric non-root uid and gid, got ${JSON.stringify(user)}`,
        );
      }
    }
    return { uid: user.uid, gid: user.gid, name: `uid ${String(user.uid)}` };
  };

  const start = async (start: RuntimeStartOptions): Promise<RuntimeInstance> => {
    const sandboxId = validateSandboxId(start.sandboxId);
    const user = sandboxIdentity(start.user);
    const workspaceHostPath = validateHostPath(start.workspaceHostPath, 'workspaceHostPath');
    const stateDir = validateHostPath(start.stateDir, 'stateDir');
    const env = validateEnv(start.env ?? {});
    const { bwrapPath, seccomp } = await check();
    // A network policy's namespace: the launcher, every command and every session's shell are started in
    // it. Without one, bwrap makes a fresh namespace with only a loopback.
    const netns: NetnsJoin | undefined =
      start.netns === undefined
        ? undefined
        : { file: validateHostPath(start.netns, 'netns'), nsenter: await nsenterPath() };
    await checkWorkspaceDir(workspaceHostPath);

    const scratchDir = posix.join(stateDir, SCRATCH_DIR);
    // Left by an older version or a crashed control plane: nothing of it is used any more.
    await rm(scratchDir, { recursive: true, force: true });
    const { tmpBytes, diskBytes: _disk, ...limits } = start.resources ?? {};
    if (tmpBytes !== undefined && (!Number.isSafeInteger(tmpBytes) || tmpBytes < 1 << 20)) {
      throw new InvalidArgumentError(
        `resources.tmpBytes must be an integer >= 1 MiB, got ${String(tmpBytes)}`,
      );
    }
    // Only a sandbox with limits gets cgroups (the host's hierarchies are detected once per runtime).
    const hasLimits = Object.values(limits).some((v) => v !== undefined);
    const sharedMounts = await systemMountsOnce();
    const files = start.files ?? [];
    if (files.length > 0 && (runDir === undefined || user === null)) {
      throw new InvalidArgumentError(
        'files for a sandbox need a sandbox user of its own (a root control plane)',
      );
    }
    // The sandbox's own files come after the shared ones (they may sit inside /etc).
    const systemMounts =
      files.length === 0 || runDir === undefined || user === null
        ? sharedMounts
        : [...sharedMounts, ...(await writeSandboxFiles({ runDir, sandboxId, gid: user.gid, files }))];
    // From here on processes of this sandbox may exist: recovery must search for them (leftovers.ts), by
    // the uid the mark holds.
    const runningMark = posix.join(stateDir, RUNNING_MARK);
    await writeFile(runningMark, user === null ? '' : String(user.uid), { mode: 0o600 });
    // The cgroups, the relay (through which the sandbox user reaches the workspace; root reaches it
    // directly) and the sandbox's own devpts (its ptys bounded, devpts.ts; it needs root, as the relay
    // does) are independent of each other: made at once, and all undone if any fails.
    const ownDevpts = runDir !== undefined && user !== null;
    const [madeCgroup, madeRelay, madeDevpts] = await Promise.allSettled([
      hasLimits
        ? cgroupHost().then((host) =>
            createSandboxCgroup({
              sandboxId,
              limits,
              logger,
              host,
              ...(options.cgroupParent === undefined ? {} : { parent: options.cgroupParent }),
            }),
          )
        : null,
      runDir !== undefined && user !== null
        ? createRelay({ runDir, sandboxId, workspaceHostPath, stateDir, gid: user.gid })
        : workspaceHostPath,
      ownDevpts ? createDevpts({ runDir, sandboxId, gid: user.gid }) : undefined,
    ]);
    if (
      madeCgroup.status === 'rejected' ||
      madeRelay.status === 'rejected' ||
      madeDevpts.status === 'rejected'
    ) {
      if (madeCgroup.status === 'fulfilled') await madeCgroup.value?.destroy();
      if (madeRelay.status === 'fulfilled' && madeRelay.value !== workspaceHostPath && runDir !== undefined)
        await clearRelay({ stateDir, relay: relayPath(runDir, sandboxId) });
      if (madeDevpts.status === 'fulfilled' && runDir !== undefined) await clearDevpts(runDir, sandboxId);
      if (runDir !== undefined) await clearSandboxFiles(runDir, sandboxId);
      // Nothing was launched.
      await rm(runningMark, { force: true });
      throw [madeCgroup, madeRelay, madeDevpts].find((made) => made.status === 'rejected')?.reason;
    }
    const cgroup: SandboxCgroup | null = madeCgroup.value;
    const boundWorkspace = madeRelay.value;
    const devptsHostPath = madeDevpts.value;
    const placeholders = [
      { hostPath: boundWorkspace, placeholder: '<workspace>' },
      { hostPath: workspaceHostPath, placeholder: '<workspace>' },
      { hostPath: stateDir, placeholder: '<state>' },
      ...(devptsHostPath === undefined ? [] : [{ hostPath: devptsHostPath, placeholder: '<devpts>' }]),
      ...(options.dataDir === undefined
        ? []
        : [{ hostPath: validateHostPath(options.dataDir, 'dataDir'), placeholder: '<data>' }]),
    ];
    const enforced = { ...(cgroup?.limits ?? NO_LIMITS), ...(tmpBytes === undefined ? {} : { tmpBytes }) };
    const createWorkspaceAnchor =
      runDir === undefined || user === null
        ? undefined
        : () => createAnchor({ relayDir: relayPath(runDir, sandboxId), workspaceHostPath, gid: user.gid });
    const launcher = !launcherWanted
      ? undefined
      : makeLauncher({
          sandboxId,
          bwrapPath,
          netns,
          identity: user,
          seccomp,
          cgroup,
          createAnchor: createWorkspaceAnchor,
          logger,
          workspaceMounted: () => isMountRoot(boundWorkspace),
          args: (anchor, mounted) =>
            buildBwrapArgs({
              workspaceHostPath: boundWorkspace,
              ...(anchor === undefined ? {} : { workspaceAnchor: anchor, workspaceOverAnchor: mounted }),
              systemMounts,
              joinsNetns: netns !== undefined,
              // af-init's own environment: BASE_ENV only; each command's comes with its SPAWN request.
              env: {},
              command: [AF_INIT_DEST, '--fd', String(LAUNCHER_CONNECTION_FD)],
              // Not /workspace: a launcher started before the worker's mount exists sees the bare mount
              // point there (root's, 0700), and bwrap's chdir would fail. Each command gets its cwd from SPAWN.
              cwd: '/',
              asPid1: true,
              dataFiles: [{ fd: LAUNCHER_BINARY_FD, dest: AF_INIT_DEST }],
              ...(cgroup === null ? { infoFd: HANDSHAKE_FDS.infoFd } : { cgroupHandshake: HANDSHAKE_FDS }),
              ...(tmpBytes === undefined ? {} : { tmpBytes }),
              ...(devptsHostPath === undefined ? {} : { devptsHostPath }),
              ...(seccomp === null ? {} : { seccompFd: SECCOMP_FD }),
            }),
        });
    logger.debug({ sandboxId, limits: enforced }, 'sandbox started');
    // Started with the sandbox (the worker may still be mounting): the first exec then only waits for it.
    launcher?.prestart();
    return new BwrapInstance({
      sandboxId,
      bwrapPath,
      workspaceHostPath: boundWorkspace,
      netns,
      env,
      launcher,
      systemMounts,
      cgroup,
      limits: enforced,
      placeholders,
      scratchDir,
      runningMark,
      maxOutputBytes,
      identity: user,
      seccomp,
      tmpBytes,
      devptsHostPath,
      ...(runDir === undefined || user === null
        ? {}
        : {
            createAnchor: createWorkspaceAnchor,
            onStop: async () => {
              await clearRelay({ stateDir, relay: relayPath(runDir, sandboxId) });
              await clearDevpts(runDir, sandboxId);
              await clearSandboxFiles(runDir, sandboxId);
            },
          }),
      logger,
    });
  };

  /**
   * The sandbox's launcher, or undefined (a bwrap per command) where it cannot keep every promise: without
   * the sandbox user there is no anchor, so a restarted worker would not show through; without the built
   * af-init there is nothing to run (logged once).
   */
  let launcherUnavailable = false;
  const makeLauncher = (
    launcherOptions: Omit<ConstructorParameters<typeof SandboxLauncher>[0], 'afInitPath'>,
  ): SandboxLauncher | undefined => {
    if (launcherOptions.createAnchor === undefined) return undefined;
    let path: string;
    try {
      path = afInitPath();
    } catch (err) {
      if (!launcherUnavailable) logger.warn({ err }, 'no exec launcher: a bwrap per command');
      launcherUnavailable = true;
      return undefined;
    }
    return new SandboxLauncher({ ...launcherOptions, afInitPath: path });
  };

  return {
    name: 'bwrap',
    traits: {
      // The sandbox user (its host uid) is not the mounter (root) ...
      needsAllowOther: identity !== null,
      // ... and owns the files it sees, so the owner mode bits carry the rules for it too.
      hostOwner: identity === null ? null : { uid: identity.uid, gid: identity.gid },
      // As root, each sandbox can run under a uid of its own (start's `user`) instead of that user.
      perSandboxUser: identity !== null,
      // Each command binds the workspace when it starts; start() never touches it.
      startsBeforeMount: true,
      acceptsImage: false,
      // A session's shell binds /workspace over its anchor (relay.ts), so the remounted worker appears
      // under it. Without the sandbox user (no relay), it would keep the dead mount.
      sessionsSurviveWorkerRestart: runDir !== undefined,
      netns: 'joins',
    },
    check: async () => {
      await check();
    },
    start,
    // A sandbox whose control plane was SIGKILLed may still run: recovery kills what is in its cgroups
    // and removes them, then kills bwrap processes outside them (leftovers.ts); then the workspace relay
    // (a bind mount under runDir) is removed.
    clearLeftovers: async (stateDir: string) => {
      // Same condition as the /proc search (leftovers.ts): a cleanly stopped or fresh sandbox has none.
      if (await mayHaveProcesses(stateDir)) {
        const inCgroups = await removeSandboxCgroups({
          sandboxId: posix.basename(posix.dirname(stateDir)),
          host: await cgroupHost(),
          logger,
          ...(options.cgroupParent === undefined ? {} : { parent: options.cgroupParent }),
        });
        if (inCgroups.length > 0)
          logger.warn({ stateDir, pids: inCgroups }, 'killed a sandbox left running (its cgroups)');
      }
      const bwrapPath = await resolveBwrapPath(options.bwrapPath).catch(() => undefined);
      if (bwrapPath !== undefined) {
        const killed = await killLeftovers(
          stateDir,
          await realpath(bwrapPath).catch(() => bwrapPath),
          (await recordedUid(stateDir)) ?? identity?.uid ?? null,
        );
        if (killed.length > 0) logger.warn({ stateDir, pids: killed }, 'killed a sandbox left running');
      }
      // The sandbox's relay and devpts (devpts.ts), named by the sandbox's id: the state directory's parent.
      const sandboxId = posix.basename(posix.dirname(stateDir));
      const byId = runDir !== undefined && isSandboxId(sandboxId);
      await clearRelay({ stateDir, ...(byId ? { relay: relayPath(runDir, sandboxId) } : {}) });
      if (runDir !== undefined && byId) {
        await clearDevpts(runDir, sandboxId);
        await clearSandboxFiles(runDir, sandboxId);
      }
    },
  };
}

/** Whether `id` is a valid sandbox id (clearLeftovers derives it from a path). */
function isSandboxId(id: string): boolean {
  try {
    validateSandboxId(id);
    return true;
  } catch {
    return false;
  }
}
