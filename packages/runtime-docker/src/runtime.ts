// The docker SandboxRuntime: checks the engine once, then starts one container per sandbox.
import { readFile, stat } from 'node:fs/promises';
import { posix } from 'node:path';
import type { RuntimeInstance, RuntimeStartOptions, SandboxRuntime } from '@agentfense/protocol';
import {
  InternalError,
  InvalidArgumentError,
  UnavailableError,
  validateEnv,
  validateSandboxId,
} from '@agentfense/protocol';
import type { ContainerInspectInfo } from 'dockerode';
import { createEngineApi, EngineApiError } from './api.js';
import type { EngineApi } from './api.js';
import { BASE_ENV, DEFAULT_IMAGE, SANDBOX_USER, STATE_LABEL, buildRunArgs } from './args.js';
import type { DockerRunSpec } from './args.js';
import { buildCreateBody } from './bodies.js';
import { resolveContainerCgroup } from './cgroup.js';
import type { ContainerCgroup } from './cgroup.js';
import { apiError, engineError } from './engine.js';
import { DEFAULT_MAX_OUTPUT_BYTES, MAX_OUTPUT_BYTES_LIMIT } from './exec.js';
import { DockerInstance, removeContainer } from './instance.js';
import { DOCKER_SECCOMP_PROFILE } from './seccomp.js';
import { clearWorkspaceRelays, createWorkspaceRelay } from './relay.js';
import { parseEngineCapabilities, planLimits } from './limits.js';
import type { EngineCapabilities } from './limits.js';
import { createStderrLogger } from './logger.js';
import type { RuntimeLogger } from './logger.js';
import { validateHostPath, validateLimits } from './validate.js';

/** Configuration of the docker runtime (all optional). */
export interface DockerRuntimeOptions {
  /** Unused at run time (the runtime speaks the Engine API); kept so existing configurations still load. */
  readonly dockerPath?: string;
  /** The engine's address (e.g. `unix:///run/agentfense/docker.sock`); default: DOCKER_HOST, else docker's default. */
  readonly dockerHost?: string;
  /** Image for sandboxes that name none; default DEFAULT_IMAGE (`agentfense/base:latest`). */
  readonly image?: string;
  /**
   * The docker network of a sandbox started with `network: true`; default `bridge`. An engine started with
   * `--bridge=none` (as `agentfense setup docker` does) has no bridge: use `host`, which is what bwrap's
   * network-on means too (the host's network namespace).
   */
  readonly networkMode?: string;
  /** Mount the image read-only (default true); /tmp and HOME are writable tmpfs either way. */
  readonly readOnlyRootfs?: boolean;
  /**
   * Look at each container's cgroup from the host (default true): OOM reports and kills that need no
   * process in the container. Needs the engine on this host and root; false uses the in-container kill
   * script only, and reports no OOM kills.
   */
  readonly hostCgroup?: boolean;
  /**
   * uid:gid of the container's processes (numeric; default SANDBOX_USER, a dedicated id). No host user
   * may have this uid (check() refuses otherwise): it is the host uid of everything the agent starts.
   */
  readonly user?: string;
  /** The control plane's data directory: shown as `<data>` in audit records. */
  readonly dataDir?: string;
  /** Cap on each of stdout/stderr of `exec` (bytes; default 16 MiB, at most 32 MiB); exceeding it kills the command. */
  readonly maxOutputBytes?: number;
  readonly logger?: RuntimeLogger;
}

/** What check() learned about the engine (cached). */
interface EngineState {
  readonly api: EngineApi;
  readonly caps: EngineCapabilities;
}

/** How long one engine query (info, inspect) may take before the engine counts as unresponsive. */
const QUERY_TIMEOUT_MS = 30_000;
/** How long creating and starting a container may take (a loaded host, a large image's first layer mount). */
const RUN_TIMEOUT_MS = 120_000;

/** Name of the runtime's scratch directory inside each sandbox's stateDir (holds the workspace relay). */
const SCRATCH_DIR = 'docker';

/** Image references as docker accepts them; never starting with `-` (it would read as an option). */
const IMAGE_REFERENCE = /^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}$/;

/** Container name of a sandbox. */
export function containerName(sandboxId: string): string {
  return `agentfense-${sandboxId}`;
}

/** Creates the docker runtime. Holds no global state: two runtimes are fully independent. */
export function createDockerRuntime(options: DockerRuntimeOptions = {}): SandboxRuntime {
  const logger = options.logger ?? createStderrLogger();
  const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  if (
    !Number.isSafeInteger(maxOutputBytes) ||
    maxOutputBytes < 1 ||
    maxOutputBytes > MAX_OUTPUT_BYTES_LIMIT
  ) {
    throw new InvalidArgumentError(`maxOutputBytes must be an integer in 1..${MAX_OUTPUT_BYTES_LIMIT}`);
  }
  const defaultImage = validateImage(options.image ?? DEFAULT_IMAGE);
  const user = validateUser(options.user ?? SANDBOX_USER);
  const networkMode = options.networkMode ?? 'bridge';
  if (!/^[A-Za-z0-9][A-Za-z0-9_.:-]*$/.test(networkMode)) {
    throw new InvalidArgumentError(`invalid networkMode ${JSON.stringify(networkMode)}`);
  }

  // One connection pool per runtime (undici keeps its connections alive between requests).
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
      await refuseHostUser(user);
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
    const workspaceHostPath = validateHostPath(start.workspaceHostPath, 'workspaceHostPath');
    const stateDir = validateHostPath(start.stateDir, 'stateDir');
    const env = validateEnv(start.env ?? {});
    const resources = start.resources ?? {};
    validateLimits(resources);
    const image = validateImage(start.image ?? defaultImage);
    const { caps } = await check();
    const workspace = await stat(workspaceHostPath).catch((err: unknown) => {
      throw new InvalidArgumentError(
        `workspace ${workspaceHostPath} is not accessible: ${(err as Error).message}`,
        { cause: err },
      );
    });
    if (!workspace.isDirectory())
      throw new InvalidArgumentError(`workspace ${workspaceHostPath} is not a directory`);

    const name = containerName(sandboxId);
    const limits = { ...planLimits(resources, caps), tmpBytes: resources.tmpBytes ?? null };
    const relay = await createWorkspaceRelay({
      workspaceHostPath,
      scratchDir: posix.join(stateDir, SCRATCH_DIR),
    });
    const spec: DockerRunSpec = {
      containerName: name,
      sandboxId,
      image,
      workspaceHostPath: relay.source,
      network: start.network === true,
      networkMode,
      env: { ...BASE_ENV, ...env },
      limits,
      swapLimit: caps.swapLimit,
      user,
      seccompProfile: DOCKER_SECCOMP_PROFILE,
      tmpBytes: resources.tmpBytes ?? null,
      // Recovery finds a crashed control plane's containers by the sandbox's state directory.
      labels: { [STATE_LABEL]: stateDir },
      ...(options.readOnlyRootfs === undefined ? {} : { readOnlyRootfs: options.readOnlyRootfs }),
    };
    // The audit record shows the container in the docker CLI's words; the engine gets the API body.
    const runArgs = buildRunArgs(spec);
    let containerId: string | undefined;
    try {
      containerId = await runContainer({ api, body: buildCreateBody(spec), name, image, logger });
      await relay.attach();
    } catch (err) {
      await removeContainer(api, containerId ?? name).catch((e: unknown) =>
        logger.warn({ err: e }, 'could not remove the container of a failed start'),
      );
      await relay.release();
      throw err;
    }
    const placeholders = [
      // The container binds the relay of the workspace: it is the workspace, and shown as such.
      { hostPath: relay.source, placeholder: '<workspace>' },
      { hostPath: workspaceHostPath, placeholder: '<workspace>' },
      { hostPath: stateDir, placeholder: '<state>' },
      ...(options.dataDir === undefined
        ? []
        : [{ hostPath: validateHostPath(options.dataDir, 'dataDir'), placeholder: '<data>' }]),
    ];
    const cgroup =
      options.hostCgroup === false
        ? Promise.resolve(null)
        : locateCgroup(api, containerId).catch((err: unknown) => {
            logger.warn(
              { err, sandboxId },
              'cannot see the container from the host: no OOM reports, slower kills',
            );
            return null;
          });
    logger.debug({ sandboxId, image, limits }, 'sandbox started');
    return new DockerInstance({
      sandboxId,
      containerId,
      relay,
      image,
      api,
      user,
      env,
      limits,
      runArgs,
      placeholders,
      cgroup,
      maxOutputBytes,
      logger,
    });
  };

  const [ownerUid, ownerGid] = user.split(':').map(Number);
  return {
    name: 'docker',
    traits: {
      // The container's user (a dedicated uid, no user-namespace remap) is not the mounter (root).
      needsAllowOther: true,
      // ... and owns the files it sees, so the owner mode bits carry the rules for it too.
      hostOwner: { uid: ownerUid ?? 0, gid: ownerGid ?? 0 },
      // The container binds the workspace (through its relay) when it is created.
      startsBeforeMount: false,
      acceptsImage: true,
      // The relay propagates a remounted worker into the running container.
      sessionsSurviveWorkerRestart: true,
    },
    check: async () => {
      await check();
    },
    start,
    // The workspace relay (a bind of the sandbox's mnt under <stateDir>/docker) outlives a crash.
    // What a crashed control plane (or a killed `run`) left: the sandbox's containers, found by the label
    // of its state directory, then the workspace relay (a bind of the sandbox's mnt under <stateDir>/docker).
    clearLeftovers: async (stateDir) => {
      try {
        const removed = await removeContainersOf(api, validateHostPath(stateDir, 'stateDir'));
        if (removed.length > 0) logger.warn({ stateDir, removed }, 'removed leftover sandbox containers');
      } catch (err) {
        // No engine: nothing of ours can be running in it. The next start of the sandbox retries this.
        if (!(err instanceof UnavailableError)) throw err;
        logger.warn({ err, stateDir }, 'no engine to look for leftover containers in');
      }
      await clearWorkspaceRelays(posix.join(stateDir, SCRATCH_DIR));
    },
  };
}

/** A numeric, non-root uid:gid. */
function validateUser(user: string): string {
  const m = /^(\d{1,10}):(\d{1,10})$/.exec(user);
  if (m === null || Number(m[1]) === 0 || Number(m[1]) > 4_294_967_294 || Number(m[2]) > 4_294_967_294) {
    throw new InvalidArgumentError(`user must be a numeric non-root uid:gid, got ${JSON.stringify(user)}`);
  }
  return user;
}

/**
 * Refuses a container uid that belongs to a host account (/etc/passwd): the sandbox's processes would run
 * as that user on the host (and could signal its processes, read its files through shared mounts).
 */
async function refuseHostUser(user: string): Promise<void> {
  const uid = user.split(':')[0];
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  const owner = passwd.split('\n').find((line) => line.split(':')[2] === uid);
  if (owner !== undefined) {
    throw new UnavailableError(
      `the docker sandbox uid ${String(uid)} belongs to host user ${owner.split(':')[0] ?? '?'}: sandboxes must ` +
        'run under a uid no host user has; choose another with the runtime option `user`',
    );
  }
}

/** Refuses image references docker would not take, or that could be read as an option. */
function validateImage(image: string): string {
  if (!IMAGE_REFERENCE.test(image)) {
    throw new InvalidArgumentError(`invalid image reference ${JSON.stringify(image)}`);
  }
  return image;
}

/**
 * Creates and starts the container, resolving to its id. A container left under the same name by a
 * crashed control plane is removed and the create retried once. A container created but not started
 * (e.g. the mount was refused) is removed before the error is reported: a failed start leaves nothing.
 */
async function runContainer(options: {
  api: EngineApi;
  body: ReturnType<typeof buildCreateBody>;
  name: string;
  image: string;
  logger: RuntimeLogger;
}): Promise<string> {
  const { api, name, image, logger } = options;
  const context = { action: 'starting the sandbox container', cli: api, image };
  for (let attempt = 0; ; attempt++) {
    let id: string;
    try {
      ({ Id: id } = await api.request<{ Id: string }>('POST', '/containers/create', {
        query: { name },
        body: options.body,
        timeoutMs: RUN_TIMEOUT_MS,
      }));
    } catch (err) {
      if (attempt === 0 && err instanceof EngineApiError && err.status === 409) {
        logger.warn({ container: name }, 'removing a stale container with the same sandbox id');
        await removeContainer(api, name);
        continue;
      }
      throw apiError(err, context);
    }
    try {
      await api.request('POST', `/containers/${id}/start`, { timeoutMs: RUN_TIMEOUT_MS });
    } catch (err) {
      await removeContainer(api, id).catch(() => undefined);
      throw apiError(err, context);
    }
    return id;
  }
}

/** The container's cgroups as the host sees them, from its init's host pid; null if not visible. */
async function locateCgroup(api: EngineApi, containerId: string): Promise<ContainerCgroup | null> {
  const info = await api
    .request<ContainerInspectInfo>('GET', `/containers/${containerId}/json`, { timeoutMs: QUERY_TIMEOUT_MS })
    .catch((err: unknown) => {
      throw apiError(err, { action: 'locating the container', cli: api });
    });
  const pid = info.State.Pid;
  if (!Number.isSafeInteger(pid) || pid <= 0) {
    throw new InternalError(`the engine reports no process for container ${containerId}`);
  }
  return resolveContainerCgroup({ initPid: pid });
}

/**
 * Force-removes every container labelled with `stateDir` (what a crashed control plane left of a sandbox),
 * and returns their ids. Idempotent.
 */
export async function removeContainersOf(api: EngineApi, stateDir: string): Promise<string[]> {
  const filters = JSON.stringify({ label: [`${STATE_LABEL}=${stateDir}`] });
  const found = await api
    .request<{ Id: string }[]>('GET', '/containers/json', {
      query: { all: true, filters },
      timeoutMs: QUERY_TIMEOUT_MS,
    })
    .catch((err: unknown) => {
      throw apiError(err, { action: 'listing sandbox containers', cli: api });
    });
  for (const { Id } of found) await removeContainer(api, Id);
  return found.map((c) => c.Id);
}
