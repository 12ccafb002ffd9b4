// The host user a sandbox runs as: a uid (and gid) of its own, leased from the host-wide table
// (host-ids/leases.ts) when it first starts and kept until it is destroyed, so the kernel's per-user limits
// are per sandbox and no two sandboxes of any data directory share a uid. The uid is recorded in the
// sandbox's directory: the delta's files are owned by it, so every later start (after a stop, a crash or
// a reboot) re-takes that same uid. A sandbox started before sandboxes had users of their own keeps the
// runtime's shared user (its files belong to that one).
import { randomUUID } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { selfIdentity } from '@agentfense/protocol';
import type { HostUser, SandboxRuntime } from '@agentfense/protocol';
import { dirOwner, processOwner } from '../host-ids/host-facts.js';
import { HostIdLeases } from '../host-ids/leases.js';
import type { SandboxPaths } from '../paths.js';
import type { SandboxRow } from '../store/sandboxes.js';

/** What the docker runtime's pool leases its idle containers' uids through (its option `hostUsers`). */
export interface HostUserLeases {
  lease(): (HostUser & { readonly owner: string }) | undefined;
  release(owner: string): void;
}

/** The sandbox users of one control plane, over one lazily opened handle on the host's table. */
export class SandboxHostUsers implements HostUserLeases {
  readonly #logger: Logger;
  readonly #open: () => HostIdLeases;
  /** null: this process is not root (no table; every sandbox runs as the runtime's shared user). */
  #leases: HostIdLeases | null | undefined;

  constructor(options: { readonly logger: Logger; readonly open?: () => HostIdLeases }) {
    this.#logger = options.logger;
    this.#open = options.open ?? (() => HostIdLeases.open());
  }

  /**
   * The user sandbox `row` starts as, leased (or re-taken) now; undefined: the runtime's shared user (the
   * runtime takes no user of the sandbox's own, this process is not root, or the sandbox is older).
   */
  async forStart(o: {
    readonly row: SandboxRow;
    readonly paths: SandboxPaths;
    readonly runtime: SandboxRuntime;
  }): Promise<HostUser | undefined> {
    const { row, paths, runtime } = o;
    const leases = runtime.traits.perSandboxUser ? this.#table() : null;
    if (leases === null) return undefined;
    const owner = dirOwner(paths.dir);
    const recorded = await readRecorded(paths.hostUser);
    if (recorded !== undefined) return leases.lease(owner, recorded);
    if (row.started_at !== null) return undefined;
    let user: HostUser | undefined;
    const reserved = await runtime.reserveUser?.({
      sandboxId: row.id,
      ...(row.image === null ? {} : { image: row.image }),
      resources: row.resources,
    });
    if (reserved !== undefined) {
      try {
        leases.transfer(reserved.uid, reserved.leaseOwner, owner);
        user = { uid: reserved.uid, gid: reserved.gid };
      } catch (err) {
        this.#logger.warn({ err, sandboxId: row.id }, 'could not take the reserved uid: leasing another');
      }
    }
    user ??= leases.lease(owner);
    // Written whole or not at all: a start that dies here leases the same uid again (it is the owner's).
    const temp = `${paths.hostUser}.${String(process.pid)}`;
    await writeFile(temp, `${String(user.uid)}:${String(user.gid)}\n`, { mode: 0o600 });
    await rename(temp, paths.hostUser);
    return user;
  }

  /**
   * A uid for something this process starts ahead (a pooled container), leased to this process until a
   * sandbox takes it; undefined when this process is not root (no table).
   */
  lease(): (HostUser & { readonly owner: string }) | undefined {
    const self = selfIdentity();
    const owner = processOwner(self.pid, self.start, randomUUID());
    const user = this.#table()?.lease(owner);
    return user === undefined ? undefined : { ...user, owner };
  }

  /** Releases the leases of `owner` (a destroyed sandbox's directory, a removed pooled container). */
  release(owner: string): void {
    try {
      this.#table()?.release(owner);
    } catch (err) {
      // The lease is taken back later anyway, once its owner is gone and nothing runs under the uid.
      this.#logger.warn({ err, owner }, 'could not release a host uid lease');
    }
  }

  /** Releases the uid of a destroyed sandbox (its processes are gone, its directory too or going). */
  releaseSandbox(paths: SandboxPaths): void {
    this.release(dirOwner(paths.dir));
  }

  close(): void {
    this.#leases?.close();
    this.#leases = undefined;
  }

  #table(): HostIdLeases | null {
    if (this.#leases === undefined) {
      this.#leases = (process.getuid?.() ?? 0) === 0 ? this.#open() : null;
    }
    return this.#leases;
  }
}

/** The uid:gid recorded in a sandbox's directory, if any. */
async function readRecorded(file: string): Promise<HostUser | undefined> {
  const text = await readFile(file, 'utf8').catch(() => undefined);
  const m = text === undefined ? null : /^(\d+):(\d+)\n?$/.exec(text);
  if (m === null) return undefined;
  return { uid: Number(m[1]), gid: Number(m[2]) };
}
