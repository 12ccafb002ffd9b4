// Container lifecycle calls shared by fresh starts and the pool: create + start (replacing a stale
// container of the same name), the host view of a container's cgroup, removal by label.
import { execFile } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import type { ContainerInspectInfo } from 'dockerode';
import { InternalError } from '@agentfense/protocol';
import { EngineApiError } from '../engine/api.js';
import type { EngineApi } from '../engine/api.js';
import { STATE_LABEL } from '../exec/args.js';
import type { buildCreateBody } from '../engine/bodies.js';
import { resolveContainerCgroup } from './cgroup.js';
import type { ContainerCgroup } from './cgroup.js';
import { apiError } from '../engine/engine-errors.js';
import { removeContainer } from '../instance.js';
import type { RuntimeLogger } from '../logger.js';

/** How long one engine query (info, inspect) may take before the engine counts as unresponsive. */
export const QUERY_TIMEOUT_MS = 30_000;
/** How long creating and starting a container may take (a loaded host, a large image's first layer mount). */
export const RUN_TIMEOUT_MS = 120_000;

/**
 * Creates and starts the container, resolving to its id. A container left under the same name by a
 * crashed control plane is removed and the create retried once. A container created but not started
 * (e.g. the mount was refused) is removed before the error is reported: a failed start leaves nothing.
 */
export async function runContainer(options: {
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

/** The host pid of the container's init (af-init), as the engine reports it. */
async function initPid(api: EngineApi, containerId: string): Promise<number> {
  const info = await api
    .request<ContainerInspectInfo>('GET', `/containers/${containerId}/json`, { timeoutMs: QUERY_TIMEOUT_MS })
    .catch((err: unknown) => {
      throw apiError(err, { action: 'locating the container', cli: api });
    });
  const pid = info.State.Pid;
  if (!Number.isSafeInteger(pid) || pid <= 0) {
    throw new InternalError(`the engine reports no process for container ${containerId}`);
  }
  return pid;
}

/** The container's cgroups as the host sees them, from its init's host pid; null if not visible. */
export async function locateCgroup(api: EngineApi, containerId: string): Promise<ContainerCgroup | null> {
  return resolveContainerCgroup({ initPid: await initPid(api, containerId) });
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

/** Docker's PATH for a container whose image sets none (what `docker exec` gives its process). */
const DOCKER_DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * The environment an engine exec in the container starts from (PATH, HOSTNAME, then the image's and the
 * container's Env), so a command spawned by af-init, which adds nothing, gets exactly what it got before.
 */
export async function containerEnv(api: EngineApi, containerId: string): Promise<Record<string, string>> {
  const info = await api
    .request<ContainerInspectInfo>('GET', `/containers/${containerId}/json`, { timeoutMs: QUERY_TIMEOUT_MS })
    .catch((err: unknown) => {
      throw apiError(err, { action: "reading the container's environment", cli: api });
    });
  const env: Record<string, string> = { PATH: DOCKER_DEFAULT_PATH, HOSTNAME: info.Config.Hostname };
  for (const entry of info.Config.Env ?? []) {
    const eq = entry.indexOf('=');
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

const execFileAsync = promisify(execFile);

/**
 * Binds the container's network namespace (from its init's host pid) on `file`, where the host's network
 * policy sets it up and polices it (packages/network). The container then holds af-init and nothing else.
 */
export async function publishNetns(api: EngineApi, containerId: string, file: string): Promise<void> {
  const pid = await initPid(api, containerId);
  await rm(file, { force: true });
  await writeFile(file, '', { mode: 0o600, flag: 'wx' });
  try {
    await execFileAsync('mount', ['--bind', `/proc/${pid}/ns/net`, file]);
  } catch (err) {
    await rm(file, { force: true });
    throw new InternalError(
      `could not bind container ${containerId}'s network namespace: ${(err as Error).message}`,
      { cause: err },
    );
  }
}
