// Recovery and reaping: settling sandboxes whose owning process died, and destroying expired ones and
// destroys that failed. Both only ever touch sandboxes no other live process owns, and neither removes a
// sandbox whose commit is unfinished (pending-commit.ts).
import type { Logger } from 'pino';
import { NotFoundError, WrongStateError } from '@agentfense/protocol';
import type { CommitMode, CommitResult } from '@agentfense/protocol';
import type { DataLayout } from '../paths.js';
import type { SandboxStore } from '../store/sandboxes.js';
import type { KeyedLock } from './keyed-lock.js';
import { isOneShot } from './one-shot.js';
import type { Ownership } from './ownership.js';
import { keepForUser, unfinishedCommit, unfinishedReason } from './pending-commit.js';

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
  readonly layout: DataLayout;
  /** The manager's commit (on a temporary worker for a sandbox nobody runs). */
  readonly commit: (id: string, options: { mode: CommitMode; paths: string[] }) => Promise<CommitResult>;
  /**
   * What recovery does with a dead owner's unfinished commit: 'keep' it for the user (the default: an
   * open serves someone's command and must not take a long commit's time), or 'finish' it (the reaper of
   * a killed `run`, which nobody waits for).
   */
  readonly unfinishedCommits: 'keep' | 'finish';
}

/** A recovered sandbox whose commit did not finish. */
interface Unfinished {
  readonly id: string;
  readonly oneShot: boolean;
  readonly mode: CommitMode;
}

/**
 * Recovers sandboxes whose owning control-plane process is gone: kills their leftover worker, clears
 * their FUSE mount and shared bind, and marks them STOPPED (the delta is kept); one-shot sandboxes are
 * destroyed. A sandbox whose commit did not finish is kept for its user instead (no longer one-shot), and
 * with `unfinishedCommits: 'finish'` its commit is finished. Sandboxes owned by a live process are never
 * touched. Returns the ids recovered.
 */
export async function recoverSandboxes(deps: RecoveryDeps): Promise<string[]> {
  const { store, owner, logger } = deps;
  const recovered: string[] = [];
  const oneShot: string[] = [];
  const unfinished: Unfinished[] = [];
  for (const row of await store.all()) {
    if (row.owner_pid === null || owner.isMine(row) || owner.ownedElsewhere(row)) continue;
    await deps.locks
      .run(row.id, async () => {
        // Claiming is atomic across processes: of several processes opening at once, one recovers it.
        const fresh = await store.find(row.id);
        if (fresh === undefined || fresh.owner_pid === null || owner.ownedElsewhere(fresh)) return;
        await owner.claim(row.id);
        await owner.release(row.id);
        recovered.push(row.id);
        const pending = await unfinishedCommit(deps.layout, row.id, logger);
        if (pending !== null) {
          const why = `control-plane process ${fresh.owner_pid} exited while committing`;
          await keepForUser(store, row.id, unfinishedReason(row.id, pending, why));
          unfinished.push({ id: row.id, oneShot: isOneShot(fresh.labels), mode: pending.mode });
          logger.warn({ sandboxId: row.id, pending }, 'recovered a sandbox whose commit did not finish');
        } else if (isOneShot(fresh.labels)) oneShot.push(row.id);
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
  if (deps.unfinishedCommits === 'finish') for (const u of unfinished) await finishCommit(deps, u);
  return recovered;
}

/**
 * Finishes a recovered sandbox's commit in the mode it was begun in (the changes it listed, nothing
 * else). Done without conflicts, a one-shot sandbox is then removed as its `run` would have done;
 * otherwise the sandbox stays, its state reason saying what the commit did and what is left.
 */
async function finishCommit(deps: RecoveryDeps, u: Unfinished): Promise<void> {
  const { logger } = deps;
  let result: CommitResult;
  try {
    result = await deps.commit(u.id, { mode: u.mode, paths: [] });
  } catch (err) {
    logger.error({ err, sandboxId: u.id }, 'finishing an unfinished commit failed; the sandbox is kept');
    return;
  }
  logger.info(
    { sandboxId: u.id, applied: result.applied.length, conflicts: result.conflicts.length },
    'finished the unfinished commit of a recovered sandbox',
  );
  if (result.interrupted !== undefined) return; // stopped again: still unfinished, as its reason says
  if (u.oneShot && result.conflicts.length === 0) {
    await deps
      .destroy(u.id)
      .catch((err: unknown) => logger.error({ err, sandboxId: u.id }, 'removal failed'));
    return;
  }
  const done = `commit finished after its control-plane process exited: ${result.applied.length} change(s) applied`;
  const left =
    result.conflicts.length === 0
      ? ''
      : `, ${result.conflicts.length} conflict(s) kept in the sandbox (\`agentfense sandbox commit ${u.id} --last-writer-wins\` overwrites them, \`agentfense sandbox discard ${u.id}\` drops them)`;
  await deps.store.update(u.id, { state_reason: `${done}${left}` });
}

/** Destroys expired sandboxes, and retries failed destroys, that this process may touch. Returns the ids destroyed. */
export async function reapSandboxes(deps: RecoveryDeps, now: number): Promise<string[]> {
  const reaped: string[] = [];
  // Destroys that failed are retried, at most once a minute each (a failure records stopped_at).
  const retries = (await deps.store.all()).filter(
    (r) =>
      r.state === 'ERROR' &&
      r.state_reason?.startsWith(DESTROY_FAILED) === true &&
      (r.stopped_at ?? 0) <= now - DESTROY_RETRY_MS,
  );
  const expired = await deps.store.expired(now);
  for (const row of [...expired, ...retries]) {
    if (deps.owner.ownedElsewhere(row)) continue;
    // Expiry never drops a commit half-way: the sandbox outlives it until the commit is finished or given
    // up (a destroy that failed was asked for, and is retried whatever it holds).
    if (expired.includes(row) && (await unfinishedCommit(deps.layout, row.id, deps.logger)) !== null) {
      deps.logger.debug({ sandboxId: row.id }, 'expired sandbox kept: its commit is unfinished');
      continue;
    }
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
