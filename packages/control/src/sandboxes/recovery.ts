// Recovery and reaping: settling sandboxes whose owning process died, and destroying expired ones and
// destroys that failed. Both only ever touch sandboxes no other live process owns.
import type { Logger } from 'pino';
import { NotFoundError, WrongStateError } from '@agentfense/protocol';
import type { SandboxStore } from '../store/sandboxes.js';
import type { KeyedLock } from './keyed-lock.js';
import { isOneShot } from './one-shot.js';
import type { Ownership } from './ownership.js';

/** Start of the state reason of a sandbox whose destroy failed (the reaper and gc retry those). */
export const DESTROY_FAILED = 'destroy failed: ';

/** How long the reaper waits before retrying a failed destroy. */
const DESTROY_RETRY_MS = 60_000;

export interface RecoveryDeps {
  readonly store: SandboxStore;
  readonly owner: Ownership;
  readonly locks: KeyedLock;
  readonly logger: Logger;
  /** The manager's destroy (takes the sandbox's lock itself). */
  readonly destroy: (id: string) => Promise<void>;
}

/**
 * Recovers sandboxes whose owning control-plane process is gone: kills their leftover worker, clears
 * their FUSE mount and shared bind, and marks them STOPPED (the delta is kept); one-shot sandboxes are
 * destroyed. Sandboxes owned by a live process are never touched. Returns the ids recovered.
 */
export async function recoverSandboxes(deps: RecoveryDeps): Promise<string[]> {
  const { store, owner, logger } = deps;
  const recovered: string[] = [];
  const oneShot: string[] = [];
  for (const row of store.all()) {
    if (row.owner_pid === null || owner.isMine(row) || owner.ownedElsewhere(row)) continue;
    await deps.locks
      .run(row.id, async () => {
        // Claiming is atomic across processes: of several processes opening at once, one recovers it.
        const fresh = store.find(row.id);
        if (fresh === undefined || fresh.owner_pid === null || owner.ownedElsewhere(fresh)) return;
        await owner.claim(row.id);
        owner.release(row.id);
        recovered.push(row.id);
        if (isOneShot(fresh.labels)) oneShot.push(row.id);
      })
      .catch((err: unknown) => {
        if (!(err instanceof WrongStateError)) logger.error({ err, sandboxId: row.id }, 'recovery failed');
      });
  }
  // `run` would have removed these itself: nobody will ask for them again.
  for (const id of oneShot) {
    await deps
      .destroy(id)
      .catch((err: unknown) =>
        logger.error({ err, sandboxId: id }, 'removing a dead one-shot sandbox failed'),
      );
  }
  return recovered;
}

/** Destroys expired sandboxes, and retries failed destroys, that this process may touch. Returns the ids destroyed. */
export async function reapSandboxes(deps: RecoveryDeps, now: number): Promise<string[]> {
  const reaped: string[] = [];
  // Destroys that failed are retried, at most once a minute each (a failure records stopped_at).
  const retries = deps.store
    .all()
    .filter(
      (r) =>
        r.state === 'ERROR' &&
        r.state_reason?.startsWith(DESTROY_FAILED) === true &&
        (r.stopped_at ?? 0) <= now - DESTROY_RETRY_MS,
    );
  for (const row of [...deps.store.expired(now), ...retries]) {
    if (deps.owner.ownedElsewhere(row)) continue;
    try {
      await deps.destroy(row.id);
      reaped.push(row.id);
      deps.logger.info({ sandboxId: row.id }, 'expired sandbox destroyed');
    } catch (err) {
      if (!(err instanceof NotFoundError)) deps.logger.error({ err, sandboxId: row.id }, 'reaping failed');
    }
  }
  return reaped;
}
