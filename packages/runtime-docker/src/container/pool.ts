// The container pool: a few idle containers per (image, /tmp size), created and started ahead of time so a
// sandbox start costs a claim (a bind, a rename, a limits update) instead of a container creation.
//
// Rules (docs/decisions.md, "Docker keeps a pool of idle containers, never shared and never returned"):
//  - a pooled container serves exactly one sandbox and is never returned: stop() removes it as it removes
//    a fresh one, and the pool creates a new one in the background;
//  - it is created exactly as a fresh sandbox container (same user, capabilities, seccomp, read-only image,
//    tmpfs, init, hostname) with `--network none` and no limits; what differs per sandbox is applied at
//    claim (limits through `POST /containers/{id}/update`, the workspace through its slot, env per exec).
//    A sandbox with files (its CA bundle) bypasses the pool: binds are fixed at creation;
//  - its /workspace binds a *slot*: an empty directory in the owner's pool directory, a shared mount, so
//    the sandbox's workspace bound onto the slot at claim propagates into the running container;
//  - its labels name the owner process; containers and pool directories of owners that are gone are
//    removed by the next pool of any process (and by `agentfense gc`);
//  - with `leases`, each is created under a host uid of its own, leased when it is created; a sandbox
//    takes it by reserving it first (reserve(): its uid becomes the sandbox's, before the sandbox's
//    mount), and only the sandbox it was reserved for may then claim it (takeReserved()).
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rmdir } from 'node:fs/promises';
import { posix } from 'node:path';
import { isSameProcess, selfIdentity } from '@agentfense/protocol';
import { execa } from 'execa';
import type { EngineApi } from '../engine/api.js';
import { POOL_DIR_LABEL, POOL_OWNER_LABEL, buildRunArgs } from '../exec/args.js';
import type { DockerRunSpec } from '../exec/args.js';
import { buildCreateBody } from '../engine/bodies.js';
import type { ContainerCgroup } from './cgroup.js';
import { QUERY_TIMEOUT_MS, locateCgroup, runContainer } from './containers.js';
import { apiError } from '../engine/engine-errors.js';
import { removeContainer } from '../instance.js';
import type { RuntimeLogger } from '../logger.js';
import { unmountBelow } from '../setup/mounts.js';
import { clearLauncherDirs, connectLauncher, listenForLauncher } from '../launcher/launcher.js';
import type { Launcher, LauncherListener } from '../launcher/launcher.js';

/** What a pooled container is made for: containers of one key are interchangeable. */
export interface PoolKey {
  readonly image: string;
  /** Size of /tmp (fixed at creation); null: the tmpfs default. */
  readonly tmpBytes: number | null;
}

/** An idle, started container waiting for its one sandbox. */
export interface PooledContainer {
  readonly id: string;
  /** Its name while idle (`agentfense-pool-<uuid>`); the claim renames it to the sandbox's. */
  readonly name: string;
  /** The directory its /workspace binds (rslave); the claim binds the sandbox's workspace relay here. */
  readonly slot: string;
  /** Its cgroups as the host sees them (null: not visible), resolved while it waited. */
  readonly cgroup: ContainerCgroup | null;
  /** The `docker run` arguments that created it (audit records). */
  readonly runArgs: readonly string[];
  /** Its af-init, connected while it waited (absent: launcher off). */
  readonly launcher?: Launcher;
  /** uid:gid of its processes. */
  readonly user: string;
  /** The owner its uid is leased under (absent: the runtime's fixed user, not leased). */
  readonly leaseOwner?: string;
}

/** A host uid leased for one pooled container, under an owner of its own. */
export interface PoolLease {
  readonly uid: number;
  readonly gid: number;
  readonly owner: string;
}

/** Where pooled containers get their uids (the control plane's host-wide leases). */
export interface PoolUserLeases {
  /** A uid for one container; undefined: none to lease (the containers run as the runtime's user). */
  lease(): PoolLease | undefined;
  /** Gives back the uid of a container removed before any sandbox took it. */
  release(owner: string): void;
}

export interface ContainerPoolOptions {
  readonly api: EngineApi;
  /** Idle containers kept per key; 0 disables the pool. */
  readonly size: number;
  /** Where owners keep their slot directories (`<dir>/<pid>-<start>/slot-<uuid>`). */
  readonly dir: string;
  /** The run spec of a pooled container of `key`, run as `user`, whose /workspace binds `slot`. */
  readonly spec: (
    key: PoolKey,
    slot: string,
    name: string,
    user: string,
    launcherDir?: string,
  ) => DockerRunSpec;
  /** uid:gid of the containers' processes when no uid is leased for them. */
  readonly user: string;
  /** Leases each container a uid of its own (absent: all run as `user`). */
  readonly leases?: PoolUserLeases | undefined;
  /** Run af-init as each container's pid 1 (launcher.ts). */
  readonly launcher: boolean;
  /** Look at each container's cgroup from the host. */
  readonly hostCgroup: boolean;
  readonly logger: RuntimeLogger;
}

/** Keys kept warm at most: each costs `size` idle containers (a sleeping init and its tmpfs). */
export const MAX_POOL_KEYS = 4;
/** How long after the last start the pool waits before refilling (the engine is busy with the start). */
export const REFILL_DELAY_MS = 1_000;
/** Largest pool size per key. */
export const MAX_POOL_SIZE = 16;
/** How long a container reserved for a sandbox waits for that sandbox's start before it is removed. */
export const RESERVATION_MS = 60_000;

const keyOf = (key: PoolKey): string => JSON.stringify([key.image, key.tmpBytes]);

export class ContainerPool {
  readonly #o: ContainerPoolOptions;
  /** Keys a sandbox started with (most recent last), each with its idle containers. */
  readonly #keys = new Map<string, { key: PoolKey; idle: PooledContainer[] }>();
  /** This process's pool directory: a shared mount made once (null until the first fill). */
  #ownerDir: Promise<string> | undefined;
  #filling: Promise<void> | undefined;
  /** The container being created now (the refill makes one at a time), by key. */
  #creating: { readonly key: string; readonly done: Promise<unknown> } | undefined;
  /** A refill waiting for the engine to go quiet (REFILL_DELAY_MS after the last start). */
  #scheduled: { timer: NodeJS.Timeout; done: Promise<void>; run: () => void } | undefined;
  #again = false;
  #closed = false;
  /** Containers reserved for a sandbox (by sandbox id), each removed if its start does not come in time. */
  readonly #reserved = new Map<string, { container: PooledContainer; timer: NodeJS.Timeout }>();

  constructor(options: ContainerPoolOptions) {
    this.#o = options;
  }

  get size(): number {
    return this.#o.size;
  }

  /** Idle containers right now (all keys). */
  get idleCount(): number {
    let n = 0;
    for (const k of this.#keys.values()) n += k.idle.length;
    return n;
  }

  /**
   * An idle container of `key` running as `user`, now theirs (never handed out again); undefined when
   * none is ready. Containers with a leased uid run as nobody's user but their own: only reserve() gives
   * those out. When one of that key is being created it is waited for: it is further along than a fresh
   * container would be, and a second creation would only compete with it for the engine.
   */
  async take(key: PoolKey, user: string): Promise<PooledContainer | undefined> {
    const taken = await this.#pick(key, (c) => c.user === user && c.leaseOwner === undefined);
    // Idle, its af-init connection did not keep the process alive; its sandbox's does.
    taken?.launcher?.client.keepProcessAlive(true);
    return taken;
  }

  /**
   * Sets an idle container of `key` with a leased uid aside for sandbox `sandboxId` (its uid is then the
   * sandbox's); removed unless takeReserved() claims it within RESERVATION_MS.
   */
  async reserve(key: PoolKey, sandboxId: string): Promise<PooledContainer | undefined> {
    if (this.#reserved.has(sandboxId)) return undefined;
    const container = await this.#pick(key, (c) => c.leaseOwner !== undefined);
    if (container === undefined || this.#reserved.has(sandboxId)) {
      if (container !== undefined) void this.#discard(container);
      return undefined;
    }
    const timer = setTimeout(() => {
      if (this.#reserved.get(sandboxId)?.container !== container) return;
      this.#reserved.delete(sandboxId);
      void this.#discard(container);
    }, RESERVATION_MS);
    timer.unref();
    this.#reserved.set(sandboxId, { container, timer });
    return container;
  }

  /** The container reserved for `sandboxId`, if it runs as `user`; now theirs. */
  takeReserved(sandboxId: string, user: string): PooledContainer | undefined {
    const reserved = this.#reserved.get(sandboxId);
    if (reserved === undefined || reserved.container.user !== user) return undefined;
    clearTimeout(reserved.timer);
    this.#reserved.delete(sandboxId);
    reserved.container.launcher?.client.keepProcessAlive(true);
    return reserved.container;
  }

  /** Removes a container taken from the pool that its sandbox cannot use (runtime.ts: files). */
  discard(c: PooledContainer): Promise<void> {
    return this.#discard(c);
  }

  /** Removes an idle container of `key` that `fits`, waiting for one of that key being created. */
  async #pick(key: PoolKey, fits: (c: PooledContainer) => boolean): Promise<PooledContainer | undefined> {
    if (this.#o.size === 0 || this.#closed) return undefined;
    const k = keyOf(key);
    const from = (): PooledContainer | undefined => {
      const idle = this.#keys.get(k)?.idle;
      const at = idle?.findIndex(fits) ?? -1;
      return at < 0 ? undefined : idle?.splice(at, 1)[0];
    };
    const found = from();
    if (found !== undefined || this.#creating?.key !== k) return found;
    await this.#creating.done.catch(() => undefined);
    return this.#closed ? undefined : from();
  }

  /**
   * Sandboxes of `key` are about to start (a control plane that will start one at once): keep `size` of
   * them from now on and start creating them now, not REFILL_DELAY_MS after a start.
   */
  prepare(key: PoolKey): void {
    if (this.#o.size === 0 || this.#closed) return;
    this.want(key);
    this.#scheduled?.run();
  }

  /**
   * A sandbox of `key` started: keep `size` idle containers of it from now on (refilled in the
   * background). Beyond MAX_POOL_KEYS keys the least recently used key is dropped with its containers.
   */
  want(key: PoolKey): void {
    if (this.#o.size === 0 || this.#closed) return;
    const k = keyOf(key);
    const entry = this.#keys.get(k) ?? { key, idle: [] };
    this.#keys.delete(k);
    this.#keys.set(k, entry);
    while (this.#keys.size > MAX_POOL_KEYS) {
      const [oldest, dropped] = this.#keys.entries().next().value as [string, { idle: PooledContainer[] }];
      this.#keys.delete(oldest);
      for (const c of dropped.idle) void this.#discard(c);
    }
    this.#schedule();
  }

  /** Waits until the background refill has nothing left to do (benchmarks, tests). */
  async settled(): Promise<void> {
    while (this.#filling !== undefined || this.#scheduled !== undefined) {
      this.#scheduled?.run(); // no need to wait for quiet: the caller is waiting for it
      await this.#filling;
    }
  }

  /**
   * Refills REFILL_DELAY_MS after the last start rather than at once: creating a container keeps the
   * engine busy (measured: the claimed sandbox's first exec took 400 ms instead of 70 while its
   * replacement was being created), and a burst of starts should not compete with its own refills.
   */
  #schedule(): void {
    if (this.#scheduled !== undefined) {
      this.#scheduled.timer.refresh();
      return;
    }
    let resolve!: () => void;
    const done = new Promise<void>((r) => (resolve = r));
    const run = (): void => {
      if (this.#scheduled?.done !== done) return;
      clearTimeout(timer);
      this.#scheduled = undefined;
      if (!this.#closed) this.#refill();
      resolve();
    };
    const timer = setTimeout(run, REFILL_DELAY_MS);
    timer.unref();
    this.#scheduled = { timer, done, run };
  }

  /** Stops refilling and removes every idle container and this process's pool directory. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#scheduled?.run();
    await this.#filling;
    const idle = [...this.#keys.values()].flatMap((k) => k.idle.splice(0));
    for (const { container, timer } of this.#reserved.values()) {
      clearTimeout(timer);
      idle.push(container);
    }
    this.#reserved.clear();
    await Promise.all(idle.map((c) => this.#discard(c)));
    if (this.#ownerDir !== undefined) {
      const dir = await this.#ownerDir.catch(() => undefined);
      if (dir !== undefined) await releaseOwnerDir(dir);
    }
  }

  #refill(): void {
    if (this.#filling !== undefined) {
      this.#again = true;
      return;
    }
    this.#filling = (async () => {
      do {
        this.#again = false;
        // One container at a time: the pool never competes with the starts it is there to speed up by
        // more than one creation.
        for (const entry of [...this.#keys.values()].reverse()) {
          while (
            !this.#closed &&
            this.#keys.get(keyOf(entry.key)) === entry &&
            entry.idle.length < this.#o.size
          ) {
            let c: PooledContainer;
            const creating = this.#create(entry.key);
            this.#creating = { key: keyOf(entry.key), done: creating };
            try {
              c = await creating;
            } catch (err) {
              this.#creating = undefined;
              // Not retried until a sandbox of the key starts again (a missing image would loop).
              this.#o.logger.warn({ err, image: entry.key.image }, 'could not create a pooled container');
              break;
            }
            if (this.#closed || this.#keys.get(keyOf(entry.key)) !== entry) await this.#discard(c);
            else entry.idle.push(c);
            // Cleared only now: a take() waiting for it finds it idle when it resumes.
            this.#creating = undefined;
          }
        }
      } while (this.#again && !this.#closed);
    })().finally(() => {
      this.#filling = undefined;
    });
  }

  async #create(key: PoolKey): Promise<PooledContainer> {
    const dir = await (this.#ownerDir ??= this.#makeOwnerDir());
    const slot = posix.join(dir, `slot-${randomUUID()}`);
    await mkdir(slot, { mode: 0o700 });
    const name = `agentfense-pool-${randomUUID()}`;
    let listener: LauncherListener | undefined;
    let id: string | undefined;
    // A uid of its own, leased now: the sandbox that takes the container takes the uid with it.
    const lease = this.#o.leases?.lease();
    const user = lease === undefined ? this.#o.user : `${String(lease.uid)}:${String(lease.gid)}`;
    try {
      listener = this.#o.launcher
        ? await listenForLauncher({ parent: dir, user, logger: this.#o.logger })
        : undefined;
      const spec = this.#o.spec(key, slot, name, user, listener?.dir);
      id = await runContainer({
        api: this.#o.api,
        body: buildCreateBody(spec),
        name,
        image: key.image,
        logger: this.#o.logger,
      });
      listener?.arm();
      const cgroup = this.#o.hostCgroup ? await locateCgroup(this.#o.api, id).catch(() => null) : null;
      const launcher = listener === undefined ? undefined : await connectLauncher(this.#o.api, id, listener);
      // An idle container does not keep the process alive: af-init ends it when the connection closes.
      launcher?.client.keepProcessAlive(false);
      return {
        id,
        name,
        slot,
        cgroup,
        runArgs: buildRunArgs(spec),
        user,
        ...(lease === undefined ? {} : { leaseOwner: lease.owner }),
        ...(launcher === undefined ? {} : { launcher }),
      };
    } catch (err) {
      if (id !== undefined) await removeContainer(this.#o.api, id).catch(() => undefined);
      await listener?.release();
      await rmdir(slot).catch(() => undefined);
      if (lease !== undefined) this.#o.leases?.release(lease.owner);
      throw err;
    }
  }

  async #discard(c: PooledContainer): Promise<void> {
    try {
      await removeContainer(this.#o.api, c.id);
      await c.launcher?.listener.release();
      await releaseSlot(c.slot);
      // Its uid goes back only once nothing runs under it (its container is gone). A reserved
      // container's lease may be its sandbox's by now: releasing under the pool's owner leaves that one.
      if (c.leaseOwner !== undefined) this.#o.leases?.release(c.leaseOwner);
    } catch (err) {
      this.#o.logger.warn({ err, container: c.id }, 'could not remove a pooled container');
    }
  }

  /**
   * `<dir>/<pid>-<start>`, bind-mounted on itself, private, then shared: a peer group of its own that the
   * pooled containers' /workspace binds are slaves of. Removes what dead owners left first.
   */
  async #makeOwnerDir(): Promise<string> {
    await collectPoolGarbage({ api: this.#o.api, logger: this.#o.logger, poolDir: this.#o.dir }).catch(
      (err: unknown) =>
        this.#o.logger.warn({ err }, 'could not look for pooled containers of dead processes'),
    );
    const self = selfIdentity();
    // Directories of owners that are gone and whose containers were already removed.
    for (const entry of await readdir(this.#o.dir).catch(() => [] as string[])) {
      const m = /^(\d+)-(\d+)$/.exec(entry);
      if (m !== null && !isSameProcess(Number(m[1]), m[2] ?? null)) {
        await releaseOwnerDir(posix.join(this.#o.dir, entry));
      }
    }
    const dir = posix.join(this.#o.dir, `${String(self.pid)}-${self.start}`);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await mountOrThrow(['--bind', '--', dir, dir]);
    await mountOrThrow(['--make-private', '--', dir]);
    await mountOrThrow(['--make-shared', '--', dir]);
    return dir;
  }
}

/** The owner label of this process. */
export function poolOwner(): string {
  const self = selfIdentity();
  return `${String(self.pid)}:${self.start}`;
}

async function mountOrThrow(args: string[]): Promise<void> {
  const r = await execa('mount', args, { reject: false, stdin: 'ignore' });
  if (r.failed) throw new Error(`\`mount ${args.join(' ')}\` failed: ${r.stderr || r.shortMessage}`);
}

/** Unmounts whatever is bound on a slot (a claimed sandbox's workspace), then removes the directory. */
export async function releaseSlot(slot: string): Promise<void> {
  await unmountBelow(slot, { inclusive: true });
  await rmdir(slot).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  });
}

/** Unmounts an owner's pool directory and its slots, then removes them (rmdir only: never crosses a mount). */
async function releaseOwnerDir(dir: string): Promise<void> {
  await unmountBelow(dir, { inclusive: true });
  for (const entry of await readdir(dir).catch(() => [] as string[])) {
    if (entry.startsWith('slot-')) await rmdir(posix.join(dir, entry)).catch(() => undefined);
  }
  await clearLauncherDirs(dir);
  await rmdir(dir).catch(() => undefined);
}

/**
 * Removes pooled containers (idle or claimed) whose owner process is gone, and their owners' pool
 * directories; resolves a description of each container removed. Containers of live owners are never
 * touched (another control plane on this host may be using them).
 */
export async function collectPoolGarbage(options: {
  api: EngineApi;
  logger: RuntimeLogger;
  /** This runtime's pool directory: only owner directories directly below it are ever unmounted. */
  poolDir: string;
}): Promise<string[]> {
  const { api } = options;
  const found = await api
    .request<{ Id: string; Names?: string[]; Labels?: Record<string, string> }[]>('GET', '/containers/json', {
      query: { all: true, filters: JSON.stringify({ label: [POOL_OWNER_LABEL] }) },
      timeoutMs: QUERY_TIMEOUT_MS,
    })
    .catch((err: unknown) => {
      throw apiError(err, { action: 'listing pooled containers', cli: api });
    });
  const removed: string[] = [];
  const dirs = new Set<string>();
  for (const c of found) {
    const [pid, start] = (c.Labels?.[POOL_OWNER_LABEL] ?? '').split(':');
    if (isSameProcess(Number(pid), start ?? null)) continue;
    await removeContainer(api, c.Id);
    removed.push(
      `pooled container ${(c.Names?.[0] ?? c.Id).replace(/^\//, '')} of process ${String(pid)} (gone)`,
    );
    // The label is whatever the container's creator wrote (anyone with the engine's socket): a directory
    // is unmounted and removed only if it is an owner directory (`<pid>-<start>`) of our own pool.
    const dir = c.Labels?.[POOL_DIR_LABEL];
    if (dir !== undefined && isOwnerDirOf(options.poolDir, dir)) dirs.add(dir);
  }
  for (const dir of dirs) await releaseOwnerDir(dir);
  if (removed.length > 0) options.logger.warn({ removed }, 'removed pooled containers of dead processes');
  return removed;
}

/** True for `<poolDir>/<pid>-<start>` exactly (selfIdentity()'s names; no other directory, no `..`). */
export function isOwnerDirOf(poolDir: string, dir: string): boolean {
  return (
    dir === posix.resolve(dir) &&
    posix.dirname(dir) === posix.resolve(poolDir) &&
    /^\d+-(\d+|unknown)$/.test(posix.basename(dir))
  );
}
