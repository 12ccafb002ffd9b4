// Claiming a pooled container for one sandbox (pool.ts): its workspace, its name, its limits. After the
// claim the container is the sandbox's alone, as a fresh one would be; stop() removes it.
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import type { EnforcedLimits } from '@agentfense/protocol';
import { EngineApiError } from '../engine/api.js';
import type { EngineApi } from '../engine/api.js';
import { buildUpdateArgs } from '../exec/args.js';
import { limitFields } from '../engine/bodies.js';
import { QUERY_TIMEOUT_MS } from './containers.js';
import { apiError } from '../engine/engine-errors.js';
import { removeContainer } from '../instance.js';
import type { RuntimeLogger } from '../logger.js';
import type { PooledContainer } from './pool.js';
import { releaseSlot } from './pool.js';
import type { WorkspaceRelay } from './relay.js';

/** Marker of a claimed pooled container in the sandbox's docker scratch dir: `pooled-<container id>`. */
const MARKER_PREFIX = 'pooled-';

export interface ClaimOptions {
  readonly api: EngineApi;
  readonly pooled: PooledContainer;
  /** The sandbox's container name (`agentfense-<id>`). */
  readonly name: string;
  /** `<stateDir>/docker`: the marker that lets recovery find the container goes there. */
  readonly scratchDir: string;
  /** The sandbox's workspace relay, bound on the pooled container's slot (createWorkspaceRelay's `slot`). */
  readonly relay: (slot: string) => Promise<WorkspaceRelay>;
  readonly limits: EnforcedLimits;
  readonly swapLimit: boolean;
  readonly logger: RuntimeLogger;
}

/**
 * Makes the pooled container the sandbox's; resolves the relay the instance releases at stop (the slot,
 * the relay, the marker) and the audit arguments of the claim. On failure everything is undone and the
 * container removed.
 */
export async function claimPooled(o: ClaimOptions): Promise<{ relay: WorkspaceRelay; auditArgs: string[] }> {
  const { api, pooled } = o;
  const marker = posix.join(o.scratchDir, `${MARKER_PREFIX}${pooled.id}`);
  let relay: WorkspaceRelay | undefined;
  let released: Promise<void> | undefined;
  const release = (): Promise<void> =>
    (released ??= (async () => {
      await releaseSlot(pooled.slot);
      await relay?.release();
      await rm(marker, { force: true });
    })());
  try {
    // First, so a crash from here on leaves what recovery needs to find the container and its slot.
    await mkdir(o.scratchDir, { recursive: true, mode: 0o700 });
    await writeFile(marker, pooled.slot, { mode: 0o600 });
    relay = await o.relay(pooled.slot);
    await rename(api, pooled.id, o.name, o.logger);
    const update = limitFields(o.limits, o.swapLimit);
    if (Object.keys(update).length > 0) {
      await api
        .request('POST', `/containers/${pooled.id}/update`, { body: update, timeoutMs: QUERY_TIMEOUT_MS })
        .catch((err: unknown) => {
          throw apiError(err, { action: "applying the sandbox's limits to a pooled container", cli: api });
        });
    }
  } catch (err) {
    await removeContainer(api, pooled.id).catch(() => undefined);
    await release().catch(() => undefined);
    throw err;
  }
  const update = buildUpdateArgs(o.name, o.limits, o.swapLimit);
  return {
    relay: { source: relay.source, attach: () => Promise.resolve(), release },
    auditArgs: [
      '&&',
      'docker',
      'rename',
      pooled.name,
      o.name,
      ...(update === null ? [] : ['&&', 'docker', ...update]),
    ],
  };
}

/** Renames the container to the sandbox's name, replacing a stale container of a crashed control plane. */
async function rename(api: EngineApi, id: string, name: string, logger: RuntimeLogger): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await api.request('POST', `/containers/${id}/rename`, { query: { name }, timeoutMs: QUERY_TIMEOUT_MS });
      return;
    } catch (err) {
      if (attempt === 0 && err instanceof EngineApiError && err.status === 409) {
        logger.warn({ container: name }, 'removing a stale container with the same sandbox id');
        await removeContainer(api, name);
        continue;
      }
      throw apiError(err, { action: 'naming a pooled container for its sandbox', cli: api });
    }
  }
}

/**
 * What a crashed control plane left of claimed pooled containers in a sandbox's docker scratch dir: each
 * marker names the container (removed) and holds its slot (unmounted, removed). Resolves the ids removed.
 */
export async function clearClaimedContainers(api: EngineApi, scratchDir: string): Promise<string[]> {
  const removed: string[] = [];
  for (const entry of await readdir(scratchDir).catch(() => [] as string[])) {
    if (!entry.startsWith(MARKER_PREFIX)) continue;
    const id = entry.slice(MARKER_PREFIX.length);
    const marker = posix.join(scratchDir, entry);
    const slot = await readFile(marker, 'utf8').catch(() => '');
    if (/^[0-9a-f]{12,64}$/.test(id)) {
      await removeContainer(api, id);
      removed.push(id);
    }
    if (posix.isAbsolute(slot) && posix.basename(slot).startsWith('slot-')) await releaseSlot(slot);
    await rm(marker, { force: true });
  }
  return removed;
}
