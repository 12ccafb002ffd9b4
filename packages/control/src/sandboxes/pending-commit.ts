// Sandboxes whose delta holds an unfinished commit (the worker's commit journal: a commit that a crash, a
// kill or a stop cut short after it began writing into the codebase). The codebase then holds part of the
// commit and the delta the rest: nothing removes such a sandbox unasked (recovery, the reapers, gc), and
// one that was to be removed is kept for its user instead, saying how to finish or give up the commit.
import type { Logger } from 'pino';
import { readPendingCommit } from '@agentfense/fuse-worker';
import type { PendingCommit } from '@agentfense/fuse-worker';
import type { DataLayout } from '../paths.js';
import type { SandboxStore } from '../store/sandboxes.js';
import { ONE_SHOT_LABEL } from './one-shot.js';

/**
 * The unfinished commit of sandbox `id`, or null. An intent record that cannot be read counts as an
 * unfinished commit of unknown size: what decides whether a delta may go must err on keeping it.
 */
export async function unfinishedCommit(
  layout: DataLayout,
  id: string,
  logger: Logger,
): Promise<PendingCommit | null> {
  try {
    return await readPendingCommit(layout.sandbox(id).delta);
  } catch (err) {
    logger.warn({ err, sandboxId: id }, 'the commit intent of a sandbox cannot be read; keeping it');
    return { mode: 'detect-conflicts', startedAt: 0, changes: 0 };
  }
}

/** What the user can do about an unfinished commit of sandbox `id` (ends a state reason). */
export function finishOrDiscard(id: string): string {
  return `its changes are kept: \`agentfense sandbox commit ${id}\` finishes the commit, \`agentfense sandbox discard ${id}\` gives it up`;
}

/** The state reason of a sandbox kept because its commit of `pending.changes` changes did not finish. */
export function unfinishedReason(id: string, pending: PendingCommit, why: string): string {
  return `commit of ${pending.changes} change(s) unfinished (${why}); ${finishOrDiscard(id)}`;
}

/**
 * The commit a sandbox was kept for is no longer unfinished (`finished`, or `given up` by a discard): a
 * state reason that still says how to finish it says what happened instead. Other reasons stay.
 */
export async function settleUnfinished(
  store: SandboxStore,
  id: string,
  how: 'finished' | 'given up',
): Promise<void> {
  const row = await store.find(id);
  if (row?.state_reason?.endsWith(finishOrDiscard(id)) !== true) return;
  await store.update(id, { state_reason: `its unfinished commit was ${how}` });
}

/**
 * Keeps sandbox `id` for its user: STOPPED if it was RUNNING or PENDING, `reason` as its state reason, and
 * no longer one-shot (nothing removes it by itself any more; it is the user's, as with `run --keep`).
 */
export async function keepForUser(store: SandboxStore, id: string, reason: string): Promise<void> {
  const row = await store.get(id);
  const stopping = row.state === 'RUNNING' || row.state === 'PENDING';
  await store.update(id, {
    ...(stopping ? { state: 'STOPPED', stopped_at: Date.now() } : {}),
    state_reason: reason,
  });
  await store.removeLabel(id, ONE_SHOT_LABEL);
}
