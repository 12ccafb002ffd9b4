// One sandbox's mounts and directories: the one setup both a start and a temporary worker go through
// (directories, leftovers cleared, the shared bind, the mount parameters), and the one way to clear them.
import { mkdir } from 'node:fs/promises';
import { basename } from 'node:path';
import { netnsPathOf, removeSandboxNetns } from '@agentfense/network';
import type { Logger } from 'pino';
import { clearFuseMount } from '@agentfense/fuse-worker';
import type { DirIdentity, HostUser, MountParams, RuntimeTraits } from '@agentfense/protocol';
import { ensurePrivateDir } from '../paths.js';
import type { SandboxPaths } from '../paths.js';
import type { SandboxRow } from '../store/sandboxes.js';
import { makeSharedBind, mountsBelow, unmountAll } from './host-mounts.js';
import { removeNetworkCgroup } from './network-cgroup.js';
import { removeWorkerCgroup } from '@agentfense/fuse-worker';
import type { RuntimeRegistry } from './runtimes.js';

export interface SandboxMountsOptions {
  readonly runtimes: RuntimeRegistry;
  readonly logger: Logger;
}

/** Sets up and clears the mounts of sandbox directories. */
export class SandboxMounts {
  readonly #runtimes: RuntimeRegistry;
  readonly #logger: Logger;

  constructor(options: SandboxMountsOptions) {
    this.#runtimes = options.runtimes;
    this.#logger = options.logger;
  }

  /**
   * Gets a sandbox directory ready for a worker's mount: private directories, whatever an earlier run
   * left mounted cleared, and (`sharedBind`, for a runtime that will see the workspace) the shared bind
   * through which a restarted worker's mount reaches a running sandbox.
   */
  async prepare(
    paths: SandboxPaths,
    options: { readonly runtimeName: string; readonly sharedBind: boolean },
  ): Promise<void> {
    // The sandbox's own directory only: a data directory removed meanwhile is not made again (the start
    // fails with ENOENT instead, before anything is mounted in it).
    await mkdir(paths.dir, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    await ensurePrivateDir(paths.dir);
    await Promise.all([paths.delta, paths.mnt, paths.state].map((dir) => ensurePrivateDir(dir)));
    // One look at the mount table: a directory with nothing mounted in it (a fresh sandbox, one stopped
    // cleanly) skips the FUSE and bind clearing, which would each read it again; the runtime's own
    // leftovers and a network namespace file are always looked for.
    if ((await mountsBelow(paths.dir)).length > 0) await this.clear(paths, options.runtimeName);
    else {
      await this.#clearRuntime(paths, options.runtimeName);
      await removeSandboxNetns(netnsPathOf(paths.state));
      await this.#removeCgroups(paths);
    }
    if (options.sharedBind) await makeSharedBind(paths.mnt, { mounted: false });
    await ensurePrivateDir(paths.workspace);
  }

  /**
   * Clears a sandbox's mounts: what its runtime left in the state directory (e.g. docker's relay, which
   * outlives a crashed control plane), the FUSE mount (aborting a hung daemon first), the shared bind;
   * then its worker's and policy point's cgroups (worker-cgroup.ts, network-cgroup.ts), killing what is
   * left in them: called only when no worker or policy point of the sandbox may run (before a start, after a stop, when recovering or collecting it).
   * A runtime that is not registered (any more) cannot clear its leftovers: that is logged.
   */
  async clear(paths: SandboxPaths, runtimeName: string | undefined): Promise<void> {
    await this.#clearRuntime(paths, runtimeName);
    await clearFuseMount(paths.workspace);
    await unmountAll(paths.mnt);
    await removeSandboxNetns(netnsPathOf(paths.state));
    await this.#removeCgroups(paths);
  }

  /** The cgroups of the sandbox's host-side processes: its worker's and its policy point's. */
  async #removeCgroups(paths: SandboxPaths): Promise<void> {
    const sandboxId = basename(paths.dir);
    await removeWorkerCgroup({ sandboxId, logger: this.#logger });
    await removeNetworkCgroup({ sandboxId, logger: this.#logger });
  }

  /** What the sandbox's runtime left in its state directory (e.g. docker's relay and containers). */
  async #clearRuntime(paths: SandboxPaths, runtimeName: string | undefined): Promise<void> {
    if (runtimeName !== undefined && this.#runtimes.names.includes(runtimeName)) {
      const runtime = await this.#runtimes.get(runtimeName);
      await runtime.clearLeftovers(paths.state);
    } else {
      this.#logger.warn({ runtime: runtimeName }, 'runtime not registered: its leftovers are not cleared');
    }
  }

  /** Clears a directory without a record (`agentfense gc`): every registered runtime clears its leftovers. */
  async clearUnknown(paths: SandboxPaths): Promise<void> {
    for (const name of this.#runtimes.names) {
      const runtime = await this.#runtimes.get(name).catch(() => undefined);
      await runtime
        ?.clearLeftovers(paths.state)
        .catch((err: unknown) =>
          this.#logger.warn({ err, runtime: name }, 'clearing runtime leftovers failed'),
        );
    }
    await clearFuseMount(paths.workspace);
    await unmountAll(paths.mnt);
    await removeSandboxNetns(netnsPathOf(paths.state));
    await this.#removeCgroups(paths);
  }
}

/**
 * The worker's mount of a stored sandbox. `lower` is the codebase directory and the identity the worker
 * must find there (CodebaseService.lowerForMount); `traits` is the runtime that will use the mount (null:
 * only the control plane reads it, through a temporary worker); `user` the sandbox's own host user, if it
 * has one (host-user.ts), else the runtime's shared one owns the files.
 */
export function mountParams(
  row: SandboxRow,
  paths: SandboxPaths,
  options: {
    readonly lower: { readonly path: string; readonly identity: DirIdentity | undefined };
    readonly traits: RuntimeTraits | null;
    readonly user?: HostUser | undefined;
    /** The bytes of the sandbox's own frozen layers, charged to its disk quota with its writable layer. */
    readonly frozenBytes?: number;
  },
): MountParams {
  const { traits, lower } = options;
  const owner = traits === null ? null : (options.user ?? traits.hostOwner);
  const { diskBytes } = row.resources;
  return {
    lowerDir: lower.path,
    ...(lower.identity === undefined ? {} : { lowerIdentity: lower.identity }),
    deltaDir: paths.delta,
    mountpoint: paths.workspace,
    rules: row.rules,
    auditAllowed: row.audit_allowed,
    // A sandbox user whose host uid is not the mounter's needs allow_other ...
    ...(traits === null ? {} : { allowOther: traits.needsAllowOther }),
    // ... and owns the files it sees, so the owner mode bits carry the rules for it too.
    ...(owner === null ? {} : { ownerUid: owner.uid, ownerGid: owner.gid }),
    // A uid of the sandbox's own: the worker serves it and root, nobody else.
    ...(options.user === undefined ? {} : { callerUid: options.user.uid }),
    ...(diskBytes === undefined ? {} : { diskQuotaBytes: diskBytes }),
    ...(options.frozenBytes === undefined ? {} : { frozenBytes: options.frozenBytes }),
  };
}
