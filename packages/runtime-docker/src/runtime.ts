// The docker SandboxRuntime: checks the engine once, then starts one container per sandbox.
import { access } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { posix } from 'node:path';
import type {
  EnforcedLimits,
  ReservedUser,
  RuntimeInstance,
  RuntimeStartOptions,
  SandboxRuntime,
} from '@agentfense/protocol';
import {
  InvalidArgumentError,
  NO_LIMITS,
  UnavailableError,
  checkMaxOutputBytes,
  checkWorkspaceDir,
  validateEnv,
  validateSandboxId,
} from '@agentfense/protocol';
import { createEngineApi } from './engine/api.js';
import type { EngineApi } from './engine/api.js';
import {
  BASE_ENV,
  DEFAULT_IMAGE,
  POOL_DIR_LABEL,
  POOL_OWNER_LABEL,
  SANDBOX_USER,
  STATE_LABEL,
  buildRunArgs,
} from './exec/args.js';
import type { DockerRunSpec } from './exec/args.js';
import { buildCreateBody } from './engine/bodies.js';
import type { ContainerCgroup } from './container/cgroup.js';
import { claimPooled, clearClaimedContainers } from './container/claim.js';
import {
  QUERY_TIMEOUT_MS,
  locateCgroup,
  publishNetns,
  removeContainersOf,
  runContainer,
} from './container/containers.js';
import { apiError, engineError } from './engine/engine-errors.js';
import { DockerInstance, removeContainer } from './instance.js';
import { DOCKER_SECCOMP_PROFILE } from './container/seccomp.js';
import { checkRelayParent, clearWorkspaceRelays, createWorkspaceRelay } from './container/relay.js';
import type { WorkspaceRelay } from './container/relay.js';
import { checkFiles, clearFiles, writeFiles } from './container/files.js';
import type { WrittenFiles } from './container/files.js';
import { parseEngineCapabilities, planLimits } from './container/limits.js';
import type { EngineCapabilities } from './container/limits.js';
import { createStderrLogger } from './logger.js';
import { ContainerPool, MAX_POOL_SIZE, collectPoolGarbage, poolOwner } from './container/pool.js';
import type { PoolKey } from './container/pool.js';
import type { DockerRuntimeOptions } from './options.js';
import { refuseHostUser, sandboxUser, validateUser } from './container/users.js';
import { IMAGE_REFERENCE, validateHostPath, validateImage, validateLimits } from './validate.js';
import { clearLauncherDirs, connectLauncher, listenForLauncher } from './launcher/launcher.js';
import type { Launcher } from './launcher/launcher.js';

/** The docker runtime: a SandboxRuntime with a container pool that close() empties. */
export interface DockerRuntime extends SandboxRuntime {
  close(): Promise<void>;
  collectGarbage(): Promise<string[]>;
  /** The container pool (sizes; settled() waits for the background refill: benchmarks, tests). */
  readonly pool: { readonly size: number; readonly idleCount: number; settled(): Promise<void> };
}

/** What check() learned about the engine (cached). */
interface EngineState {
  readonly api: EngineApi;
  readonly caps: EngineCapabilities;
}

/** Name of the runtime's scratch directory inside each sandbox's stateDir (holds the workspace relay). */
const SCRATCH_DIR = 'docker';

/** Container name of a sandbox. */
export function containerName(sandboxId: string): string {
  return `agentfense-${sandboxId}`;
}

/** Creates the docker runtime. Holds no global state: two runtimes are fully independent. */
export function createDockerRuntime(options: DockerRuntimeOptions = {}): DockerRuntime {
  const logger = options.logger ?? createStderrLogger();
  const maxOutputBytes = checkMaxOutputBytes(options.maxOutputBytes);
  const defaultImage = validateImage(options.image ?? DEFAULT_IMAGE);
  const defaultUser = validateUser(options.user ?? SANDBOX_USER);
  const poolSize = options.poolSize ?? 0;
  if (!Number.isInteger(poolSize) || poolSize < 0 || poolSize > MAX_POOL_SIZE) {
    throw new InvalidArgumentError(
      `poolSize must be an integer from 0 to ${MAX_POOL_SIZE} (idle containers kept per image), got ${String(poolSize)}`,
    );
  }

  // One connection pool per runtime (undici keeps its connections alive between requests).
  // af-init as each container's pid 1 spawns commands (launcher.ts); it needs the host's view of the
  // container's cgroup (kills) and an engine on this host (the socket is bound in).
  const useLauncher = options.launcher !== false && options.hostCgroup !== false;
  const api = createEngineApi(options.dockerHost);
  // The successful check is cached (the engine does not change its cgroup support under us); a failed one
  // is retried next time, so starting the engine does not need a restart.
  let checked: Promise<EngineState> | undefined;
  const check = (): Promise<EngineState> => {
    checked ??= (async () => {
      const context = { action: 'checking the engine', cli: api };
      const info = await api
        .request<Record<string, unknown>>('GET', '/info', { timeoutMs: QUERY_TIMEOUT_MS })
        .catch((err: unknown) => {
          throw apiError(err, context);
        });
      if (typeof info['ServerVersion'] !== 'string') {
        throw engineError(`no server version in ${JSON.stringify(info).slice(0, 200)}`, context);
      }
      await api
        .request('GET', `/images/${encodeURIComponent(defaultImage)}/json`, { timeoutMs: QUERY_TIMEOUT_MS })
        .catch((err: unknown) => {
          throw apiError(err, { action: 'checking the image', cli: api, image: defaultImage });
        });
      await refuseHostUser(defaultUser);
      return { api, caps: parseEngineCapabilities(info) };
    })();
    // Not a swallowed error: callers still get the rejection; this only forgets it so the next call retries.
    checked.catch(() => {
      checked = undefined;
    });
    return checked;
  };

  const start = async (start: RuntimeStartOptions): Promise<RuntimeInstance> => {
    const sandboxId = validateSandboxId(start.sandboxId);
    const files = checkFiles(start.files ?? []);
    const workspaceHostPath = validateHostPath(start.workspaceHostPath, 'workspaceHostPath');
    const stateDir = validateHostPath(start.stateDir, 'stateDir');
    const env = validateEnv(start.env ?? {});
    const resources = start.resources ?? {};
    validateLimits(resources);
    const image = validateImage(start.image ?? defaultImage);
    const { caps } = await check();
    // The sandbox's own uid (leased by the control plane), else the fixed one.
    const user = start.user === undefined ? defaultUser : await sandboxUser(start.user);
    await checkWorkspaceDir(workspaceHostPath);

    const name = containerName(sandboxId);
    const limits = { ...planLimits(resources, caps), tmpBytes: resources.tmpBytes ?? null };
    const scratchDir = posix.join(stateDir, SCRATCH_DIR);
    // Before a pooled container is taken: a workspace the relay cannot follow would waste it.
    await checkRelayParent(workspaceHostPath);
    const netnsFile = start.netns === undefined ? undefined : validateHostPath(start.netns, 'netns');
    const key: PoolKey = { image, tmpBytes: resources.tmpBytes ?? null };
    // Every container has a network namespace of its own with only a loopback (`--network none`),
    // pooled or not; a network policy polices that namespace from the host (publishNetns below).
    // Files are binds, fixed when a container is created: a sandbox with files gets a fresh one (its
    // reserved container, made before its files were known, is removed; its uid stays the sandbox's).
    const reserved = pool.takeReserved(sandboxId, user);
    if (reserved !== undefined && files.length > 0) await pool.discard(reserved);
    const pooled = files.length > 0 ? undefined : (reserved ?? (await pool.take(key, user)));
    let started:
      | {
          containerId: string;
          relay: WorkspaceRelay;
          runArgs: string[];
          cgroup: Promise<ContainerCgroup | null>;
          launcher?: Launcher;
        }
      | undefined;
    if (pooled !== undefined) {
      try {
        const claimed = await claimPooled({
          relay: (slot) => createWorkspaceRelay({ workspaceHostPath, scratchDir, slot }),
          api,
          pooled,
          name,
          scratchDir,
          limits,
          swapLimit: caps.swapLimit,
          logger,
        });
        started = {
          containerId: pooled.id,
          relay: claimed.relay,
          runArgs: [...pooled.runArgs, ...claimed.auditArgs],
          cgroup: Promise.resolve(pooled.cgroup),
          ...(pooled.launcher === undefined ? {} : { launcher: pooled.launcher }),
        };
      } catch (err) {
        // The claim undid itself (container removed, relay released): start a fresh container instead.
        await pooled.launcher?.listener.release();
        logger.warn({ err, sandboxId }, 'could not claim a pooled container: starting a fresh one');
      }
    }
    if (started === undefined) {
      const written = files.length === 0 ? undefined : await writeFiles(scratchDir, files);
      // The relay's release also removes the files: the instance releases it once the container is gone.
      const fresh = await createWorkspaceRelay({ workspaceHostPath, scratchDir }).then(
        (relay) => withFiles(relay, written),
        async (err: unknown) => {
          await written?.release();
          throw err;
        },
      );
      const listener = useLauncher
        ? await listenForLauncher({ parent: scratchDir, user, logger }).catch(async (err: unknown) => {
            await fresh.release();
            throw err;
          })
        : undefined;
      const spec = containerSpec({
        ...(listener === undefined ? {} : { launcherDir: listener.dir }),
        key,
        name,
        sandboxId,
        workspace: fresh.source,
        env,
        limits,
        swapLimit: caps.swapLimit,
        labels: { [STATE_LABEL]: stateDir },
        user,
        ...(written === undefined ? {} : { files: written.binds }),
      });
      let containerId: string | undefined;
      let launcher: Launcher | undefined;
      try {
        containerId = await runContainer({ api, body: buildCreateBody(spec), name, image, logger });
        listener?.arm();
        await fresh.attach();
        if (listener !== undefined) launcher = await connectLauncher(api, containerId, listener);
      } catch (err) {
        await removeContainer(api, containerId ?? name).catch((e: unknown) =>
          logger.warn({ err: e }, 'could not remove the container of a failed start'),
        );
        await listener?.release();
        await fresh.release();
        throw err;
      }
      const id = containerId;
      const cgroup =
        options.hostCgroup === false
          ? Promise.resolve(null)
          : locateCgroup(api, id).catch((err: unknown) => {
              logger.warn(
                { err, sandboxId },
                'cannot see the container from the host: no OOM reports, slower kills',
              );
              return null;
            });
      // The audit record shows the container in the docker CLI's words; the engine got the API body.
      started = {
        containerId: id,
        relay: fresh,
        runArgs: buildRunArgs(spec),
        cgroup,
        ...(launcher === undefined ? {} : { launcher }),
      };
    }
    // From now on keep containers of this kind ready for the next sandbox.
    pool.want(key);
    const placeholders = [
      // The container binds the relay of the workspace (or a pool slot bound to it): it is the workspace.
      { hostPath: started.relay.source, placeholder: '<workspace>' },
      ...(pooled === undefined ? [] : [{ hostPath: pooled.slot, placeholder: '<workspace>' }]),
      { hostPath: workspaceHostPath, placeholder: '<workspace>' },
      { hostPath: stateDir, placeholder: '<state>' },
      ...(options.dataDir === undefined
        ? []
        : [{ hostPath: validateHostPath(options.dataDir, 'dataDir'), placeholder: '<data>' }]),
    ];
    logger.debug({ sandboxId, image, limits, pooled: pooled !== undefined }, 'sandbox started');
    const instance = new DockerInstance({
      sandboxId,
      containerId: started.containerId,
      relay: started.relay,
      image,
      api,
      user,
      env,
      // A pooled container was created before its sandbox's env was known: every command carries it.
      execEnv: started.containerId === pooled?.id ? env : {},
      limits,
      runArgs: started.runArgs,
      placeholders,
      cgroup: started.cgroup,
      maxOutputBytes,
      logger,
      ...(started.launcher === undefined ? {} : { launcher: started.launcher }),
    });
    if (netnsFile !== undefined) {
      try {
        await publishNetns(api, started.containerId, netnsFile);
      } catch (err) {
        await instance.stop();
        throw err;
      }
    }
    return instance;
  };

  /** The run spec of a sandbox container, or of a pooled one (empty sandbox id, BASE_ENV, no limits). */
  const containerSpec = (o: {
    key: PoolKey;
    name: string;
    sandboxId: string;
    workspace: string;
    env: Readonly<Record<string, string>>;
    limits: EnforcedLimits;
    swapLimit: boolean;
    labels: Readonly<Record<string, string>>;
    user: string;
    launcherDir?: string;
    files?: DockerRunSpec['files'];
  }): DockerRunSpec => ({
    containerName: o.name,
    sandboxId: o.sandboxId,
    image: o.key.image,
    workspaceHostPath: o.workspace,
    env: { ...BASE_ENV, ...o.env },
    limits: o.limits,
    swapLimit: o.swapLimit,
    user: o.user,
    seccompProfile: DOCKER_SECCOMP_PROFILE,
    tmpBytes: o.key.tmpBytes,
    labels: o.labels,
    ...(o.launcherDir === undefined ? {} : { launcherDir: o.launcherDir }),
    ...(o.files === undefined ? {} : { files: o.files }),
    ...(options.readOnlyRootfs === undefined ? {} : { readOnlyRootfs: options.readOnlyRootfs }),
  });

  const poolDir =
    options.poolDir ??
    (options.dataDir === undefined
      ? posix.join(tmpdir(), 'agentfense-docker-pool')
      : posix.join(validateHostPath(options.dataDir, 'dataDir'), 'docker-pool'));
  const pool = new ContainerPool({
    api,
    size: poolSize,
    dir: poolDir,
    hostCgroup: options.hostCgroup !== false,
    logger,
    user: defaultUser,
    leases: options.hostUsers,
    launcher: useLauncher,
    spec: (key, slot, name, user, launcherDir) =>
      containerSpec({
        ...(launcherDir === undefined ? {} : { launcherDir }),
        key,
        name,
        sandboxId: '',
        workspace: slot,
        env: {},
        limits: NO_LIMITS,
        swapLimit: false,
        user,
        // Whoever finds it after this process is gone removes it (and its pool directory).
        labels: { [POOL_OWNER_LABEL]: poolOwner(), [POOL_DIR_LABEL]: posix.dirname(slot) },
      }),
  });

  const [ownerUid, ownerGid] = defaultUser.split(':').map(Number);
  /** A pooled container with a uid of its own, set aside for this sandbox (pool.ts reserve()). */
  const reserveUser = async (o: {
    sandboxId: string;
    image?: string;
    resources?: { readonly tmpBytes?: number };
  }): Promise<ReservedUser | undefined> => {
    if (!IMAGE_REFERENCE.test(o.image ?? defaultImage)) return undefined;
    const key = { image: o.image ?? defaultImage, tmpBytes: o.resources?.tmpBytes ?? null };
    // prepare() starts the pool's first container once the engine check is done: waiting for that check
    // too lets reserve() find the container being created and wait for it instead of leasing a new uid
    // (and creating a second container) for a sandbox that started right after its control plane opened.
    if (pool.size > 0) await check().catch(() => undefined);
    const reserved = await pool.reserve(key, validateSandboxId(o.sandboxId));
    if (reserved?.leaseOwner === undefined) return undefined;
    const [uid, gid] = reserved.user.split(':').map(Number);
    return { uid: uid ?? 0, gid: gid ?? 0, leaseOwner: reserved.leaseOwner };
  };
  return {
    name: 'docker',
    traits: {
      // The container's user (a dedicated uid, no user-namespace remap) is not the mounter (root).
      needsAllowOther: true,
      // ... and owns the files it sees, so the owner mode bits carry the rules for it too.
      hostOwner: { uid: ownerUid ?? 0, gid: ownerGid ?? 0 },
      // start()'s user, when given, is the container's: a uid of the sandbox's own.
      perSandboxUser: true,
      // The container binds the workspace (through its relay) when it is created.
      startsBeforeMount: false,
      acceptsImage: true,
      // The relay propagates a remounted worker into the running container.
      sessionsSurviveWorkerRestart: true,
      netns: 'publishes',
    },
    check: async () => {
      await check();
    },
    start,
    reserveUser,
    // The workspace relay (a bind of the sandbox's mnt under <stateDir>/docker) outlives a crash.
    // What a crashed control plane (or a killed `run`) left: the sandbox's containers, found by the label
    // of its state directory, then the workspace relay (a bind of the sandbox's mnt under <stateDir>/docker).
    clearLeftovers: async (stateDir) => {
      // Every start makes its scratch directory before anything else (the relay of a fresh container, the
      // marker of a claimed one): without it, this sandbox never had a container (a fresh sandbox), and
      // asking the engine would only cost a round trip on every start.
      const scratch = posix.join(validateHostPath(stateDir, 'stateDir'), SCRATCH_DIR);
      if (!(await exists(scratch))) return;
      try {
        const removed = [
          ...(await removeContainersOf(api, validateHostPath(stateDir, 'stateDir'))),
          // A claimed pooled container carries no state-dir label: its marker names it.
          ...(await clearClaimedContainers(api, posix.join(stateDir, SCRATCH_DIR))),
        ];
        if (removed.length > 0) logger.warn({ stateDir, removed }, 'removed leftover sandbox containers');
      } catch (err) {
        // No engine: nothing of ours can be running in it. The next start of the sandbox retries this.
        if (!(err instanceof UnavailableError)) throw err;
        logger.warn({ err, stateDir }, 'no engine to look for leftover containers in');
      }
      await clearWorkspaceRelays(posix.join(stateDir, SCRATCH_DIR));
      await clearLauncherDirs(posix.join(stateDir, SCRATCH_DIR));
      await clearFiles(posix.join(stateDir, SCRATCH_DIR));
    },
    prepare: (kind) => {
      let key: PoolKey;
      try {
        key = {
          image: validateImage(kind.image ?? defaultImage),
          tmpBytes: kind.resources?.tmpBytes ?? null,
        };
      } catch {
        return; // an invalid image fails the start that names it
      }
      // Containers are made from an image the engine was checked to have.
      check().then(
        () => pool.prepare(key),
        (err: unknown) => logger.debug({ err }, 'engine check ahead failed'),
      );
    },
    close: () => pool.close(),
    collectGarbage: async () => {
      try {
        return await collectPoolGarbage({ api, logger, poolDir });
      } catch (err) {
        if (err instanceof UnavailableError) return []; // no engine: nothing of ours runs in it
        throw err;
      }
    },
    pool,
  };
}

/** The relay, whose release also removes the start's files (written: absent without files). */
function withFiles(relay: WorkspaceRelay, written: WrittenFiles | undefined): WorkspaceRelay {
  if (written === undefined) return relay;
  return {
    source: relay.source,
    attach: () => relay.attach(),
    release: async () => {
      await relay.release();
      await written.release();
    },
  };
}

/** Whether `path` exists (anything at all there). */
function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
