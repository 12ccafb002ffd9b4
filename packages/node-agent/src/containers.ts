// The sandbox containers the orchestrator started on this node, found on the node's own engine by the
// sandbox-id label the adapters set. The user a container runs as is read from its init process on the
// host (/proc), not from its image's word, so the view's owner and allowed caller are the real ones.
import { readFile } from 'node:fs/promises';
import { ConflictError, NotFoundError, UnavailableError } from '@agentfense/protocol';
import { SANDBOX_ID_LABEL } from '@agentfense/orchestrator/swarm';
import type { EngineApi } from '@agentfense/runtime-docker';

const QUERY_TIMEOUT_MS = 15_000;

/** A running sandbox container on this node. */
export interface SandboxContainer {
  readonly id: string;
  /** Its init's pid on the host. */
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

interface ListedContainer {
  readonly Id: string;
  readonly Labels?: Record<string, string>;
}

/**
 * The containers labelled with `sandboxId` in one of `states` (at most one running is expected). A
 * restarting one counts as placed here: the orchestrator's restart policy brings it back on this node.
 */
async function listFor(
  api: EngineApi,
  sandboxId: string,
  states: readonly string[] = ['running'],
): Promise<ListedContainer[]> {
  const filters = JSON.stringify({ label: [`${SANDBOX_ID_LABEL}=${sandboxId}`], status: states });
  const listed = await api
    .request<ListedContainer[]>('GET', '/containers/json', {
      query: { filters },
      timeoutMs: QUERY_TIMEOUT_MS,
    })
    .catch((err: unknown) => {
      throw new UnavailableError(`the node's engine (${api.host}) did not list containers: ${String(err)}`);
    });
  // The engine's filter is trusted no further than needed: the label must be exactly this id.
  return listed.filter((c) => c.Labels?.[SANDBOX_ID_LABEL] === sandboxId);
}

/** Whether a container of `sandboxId` runs on this node now. */
export async function runsHere(api: EngineApi, sandboxId: string): Promise<boolean> {
  return (await listFor(api, sandboxId, ['created', 'running', 'restarting'])).length > 0;
}

function idsOf(status: string, field: 'Uid' | 'Gid'): number {
  const line = status.split('\n').find((l) => l.startsWith(`${field}:`));
  const value = Number(line?.split(/\s+/)[1]);
  if (!Number.isSafeInteger(value) || value < 0)
    throw new UnavailableError(`no ${field} in the container's status`);
  return value;
}

/** The one running container of `sandboxId` on this node, with its init's pid and identity. */
export async function findContainer(api: EngineApi, sandboxId: string): Promise<SandboxContainer> {
  const found = await listFor(api, sandboxId);
  if (found.length === 0) throw new NotFoundError(`no running container of ${sandboxId} on this node`);
  if (found.length > 1)
    throw new ConflictError(`${found.length} running containers of ${sandboxId} on this node`);
  const id = found[0]!.Id;
  const info = await api
    .request<{ State: { Pid: number; Running: boolean } }>('GET', `/containers/${id}/json`, {
      timeoutMs: QUERY_TIMEOUT_MS,
    })
    .catch((err: unknown) => {
      throw new UnavailableError(`the node's engine did not describe container ${id}: ${String(err)}`);
    });
  const pid = info.State.Pid;
  if (!info.State.Running || !Number.isSafeInteger(pid) || pid <= 0) {
    throw new NotFoundError(`the container of ${sandboxId} is not running`);
  }
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => {
    throw new NotFoundError(`the container of ${sandboxId} has no process any more`);
  });
  return { id, pid, uid: idsOf(status, 'Uid'), gid: idsOf(status, 'Gid') };
}
