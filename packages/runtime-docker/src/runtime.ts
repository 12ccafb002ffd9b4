// The docker SandboxRuntime: checks the engine once, then starts one container per sandbox.
import { stat } from 'node:fs/promises';
import { posix } from 'node:path';
import type { RuntimeInstance, RuntimeStartOptions, SandboxRuntime } from '@agentfense/protocol';
import {
  InternalError,
  InvalidArgumentError,
  UnavailableError,
  validateEnv,
  validateSandboxId,
} from '@agentfense/protocol';
import { BASE_ENV, DEFAULT_IMAGE, SANDBOX_USER, buildRunArgs } from './args.js';
import { resolveContainerCgroup } from './cgroup.js';
import type { ContainerCgroup } from './cgroup.js';
import { createDockerCli, engineError, runDocker } from './engine.js';
import type { DockerCli } from './engine.js';
import { DEFAULT_MAX_OUTPUT_BYTES, MAX_OUTPUT_BYTES_LIMIT } from './exec.js';
import { DockerInstance } from './instance.js';
import { clearWorkspaceRelays, createWorkspaceRelay } from './relay.js';
import { parseEngineCapabilities, planLimits } from './limits.js';
import type { EngineCapabilities } from './limits.js';
import { createStderrLogger } from './logger.js';
import type { RuntimeLogger } from './logger.js';
import { validateHostPath, validateLimits } from './validate.js';

/** Configuration of the docker runtime (all optional). */
export interface DockerRuntimeOptions {
  /** The docker CLI; default: `docker` found on PATH or in /usr/bin. */
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
  /** The control plane's data directory: shown as `<data>` in audit records. */
  readonly dataDir?: string;
  /** Cap on each of stdout/stderr of `exec` (bytes; default 16 MiB, at most 32 MiB); exceeding it kills the command. */
  readonly maxOutputBytes?: number;
  readonly logger?: RuntimeLogger;
}

/** What check() learned about the engine (cached). */
interface EngineState {
  readonly cli: DockerCli;
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
  const networkMode = options.networkMode ?? 'bridge';
  if (!/^[A-Za-z0-9][A-Za-z0-9_.:-]*$/.test(networkMode)) {
    throw new InvalidArgumentError(`invalid networkMode ${JSON.stringify(networkMode)}`);
  }

  // The successful check is cached (the engine does not change its cgroup support under us); a failed one
  // is retried next time, so starting the engine does not need a restart.
  let checked: Promise<EngineState> | undefined;
  const check = (): Promise<EngineState> => {
    checked ??= (async () => {
      const cli = await createDockerCli({
        ...(options.dockerPath === undefined ? {} : { dockerPath: options.dockerPath }),
        ...(options.dockerHost === undefined ? {} : { dockerHost: options.dockerHost }),
      });
      const info = await runDocker(cli, ['info', '--format', '{{json .}}'], { timeoutMs: QUERY_TIMEOUT_MS });
      const parsed = parseInfo(info.stdout);
      const serverErrors = Array.isArray(parsed?.['ServerErrors']) ? parsed['ServerErrors'].join('; ') : '';
      if (
        info.failed ||
        parsed === null ||
        serverErrors !== '' ||
        typeof parsed['ServerVersion'] !== 'string'
      ) {
        throw engineError(`${info.stderr}\n${serverErrors}`, { action: 'checking the engine', cli });
      }
      const image = await runDocker(cli, ['image', 'inspect', '--format', '{{.Id}}', defaultImage], {
        timeoutMs: QUERY_TIMEOUT_MS,
      });
      if (image.failed) {
        throw engineError(image.stderr, { action: 'checking the image', cli, image: defaultImage });
      }
      return { cli, caps: parseEngineCapabilities(parsed) };
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
    const { cli, caps } = await check();
    const workspace = await stat(workspaceHostPath).catch((err: unknown) => {
      throw new InvalidArgumentError(
        `workspace ${workspaceHostPath} is not accessible: ${(err as Error).message}`,
        { cause: err },
      );
    });
    if (!workspace.isDirectory())
      throw new InvalidArgumentError(`workspace ${workspaceHostPath} is not a directory`);

    const name = containerName(sandboxId);
    const limits = planLimits(resources, caps);
    const relay = await createWorkspaceRelay({
      workspaceHostPath,
      scratchDir: posix.join(stateDir, SCRATCH_DIR),
    });
    const runArgs = buildRunArgs({
      containerName: name,
      sandboxId,
      image,
      workspaceHostPath: relay.source,
      network: start.network === true,
      networkMode,
      env: { ...BASE_ENV, ...env },
      limits,
      swapLimit: caps.swapLimit,
      ...(options.readOnlyRootfs === undefined ? {} : { readOnlyRootfs: options.readOnlyRootfs }),
    });
    let containerId: string;
    try {
      containerId = await runContainer({ cli, runArgs, name, image, logger });
      await relay.attach();
    } catch (err) {
      await runDocker(cli, ['rm', '--force', '--volumes', name], { timeoutMs: QUERY_TIMEOUT_MS }).catch(
        (e: unknown) => logger.warn({ err: e }, 'could not remove the container of a failed start'),
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
        : locateCgroup(cli, containerId).catch((err: unknown) => {
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
      cli,
      env,
      limits,
      runArgs,
      placeholders,
      cgroup,
      maxOutputBytes,
      logger,
    });
  };

  const [ownerUid, ownerGid] = SANDBOX_USER.split(':').map(Number);
  return {
    name: 'docker',
    traits: {
      // The container's user (uid 1000, no user-namespace remap) is not the mounter (root).
      needsAllowOther: true,
      // ... and owns the files it sees, so the owner mode bits carry the rules for it too.
      hostOwner: { uid: ownerUid ?? 1000, gid: ownerGid ?? 1000 },
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
    clearLeftovers: (stateDir) => clearWorkspaceRelays(posix.join(stateDir, SCRATCH_DIR)),
  };
}

/** Refuses image references docker would not take, or that could be read as an option. */
function validateImage(image: string): string {
  if (!IMAGE_REFERENCE.test(image)) {
    throw new InvalidArgumentError(`invalid image reference ${JSON.stringify(image)}`);
  }
  return image;
}

/** `docker info --format '{{json .}}'` as an object, or null if it is not JSON. */
function parseInfo(stdout: string): Record<string, unknown> | null {
  try {
    const parsed: unknown = JSON.parse(stdout);
    return parsed !== null && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null; // not JSON: the engine did not answer (the caller reports stderr)
  }
}

/**
 * `docker run`, resolving to the container's id; a container left under the same name by a crashed control plane is removed and the run
 * retried once. A container created but not started (e.g. the mount was refused) is removed before the
 * error is reported, so a failed start leaves nothing behind.
 */
async function runContainer(options: {
  cli: DockerCli;
  runArgs: readonly string[];
  name: string;
  image: string;
  logger: RuntimeLogger;
}): Promise<string> {
  const { cli, name, image, logger } = options;
  for (let attempt = 0; ; attempt++) {
    const result = await runDocker(cli, options.runArgs, { timeoutMs: RUN_TIMEOUT_MS });
    const id = result.stdout.trim().split('\n').pop() ?? '';
    if (!result.failed && /^[0-9a-f]{64}$/.test(id)) return id;
    if (!result.failed) throw new InternalError(`docker run printed no container id: ${result.stdout}`);
    const remove = (): Promise<unknown> =>
      runDocker(cli, ['rm', '--force', '--volumes', name], { timeoutMs: QUERY_TIMEOUT_MS });
    if (attempt === 0 && /Conflict\. The container name/i.test(result.stderr)) {
      logger.warn({ container: name }, 'removing a stale container with the same sandbox id');
      await remove();
      continue;
    }
    const err = engineError(result.stderr, { action: 'starting the sandbox container', cli, image });
    if (!(err instanceof UnavailableError && /no Docker engine answers/.test(err.message))) await remove();
    throw err;
  }
}

/** The container's cgroups as the host sees them, from its init's host pid; null if not visible. */
async function locateCgroup(cli: DockerCli, containerId: string): Promise<ContainerCgroup | null> {
  const result = await runDocker(cli, ['inspect', '--format', '{{.State.Pid}}', containerId], {
    timeoutMs: QUERY_TIMEOUT_MS,
  });
  const pid = Number(result.stdout.trim());
  if (result.failed || !Number.isSafeInteger(pid) || pid <= 0) {
    throw engineError(result.stderr, { action: 'locating the container', cli });
  }
  return resolveContainerCgroup({ initPid: pid });
}
