// Sandboxes made for one command (`agentfense run` without --keep) and spares started ahead (spare.ts):
// their process removes them itself, and one whose process died before it could (SIGKILL, a crash) is
// garbage nobody will ask for again, so recovery and `agentfense gc` remove it instead of leaving a
// STOPPED record and its files behind.

/** Label `run` puts on the sandboxes it will remove itself (value "true"). */
export const ONE_SHOT_LABEL = 'agentfense.run';

/**
 * True for a sandbox nobody asks for again once its process is gone (from the labels of its record): one
 * `run` created to remove after its command, or a spare still waiting to be taken (SPARE_LABEL).
 */
export function isOneShot(labels: Readonly<Record<string, string>>): boolean {
  return labels[ONE_SHOT_LABEL] === 'true' || labels[SPARE_LABEL] === 'true';
}

/**
 * Reserved label of a spare sandbox the run helper or the library keeps started for the next identical
 * request (spare.ts). An idle spare is internal: listings leave it out unless the caller filters on
 * this key, users may not set it, and it is removed when a request takes the spare, so the sandbox is
 * listed and labelled as any other.
 */
export const SPARE_LABEL = 'agentfense.spare';
