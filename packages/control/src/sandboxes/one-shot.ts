// Sandboxes made for one command (`agentfense run` without --keep): the CLI removes them itself, and one
// whose process died before it could (SIGKILL, a crash) is garbage nobody will ask for again, so recovery
// and `agentfense gc` remove it instead of leaving a STOPPED record and its files behind.

/** Label `run` puts on the sandboxes it will remove itself (value "true"). */
export const ONE_SHOT_LABEL = 'agentfense.run';

/** True for a sandbox `run` created to remove after its command (from the labels of its record). */
export function isOneShot(labels: Readonly<Record<string, string>>): boolean {
  return labels[ONE_SHOT_LABEL] === 'true';
}

/**
 * Reserved label of a spare sandbox the run helper keeps started for the next identical `run`
 * (cli/run-helper/spare.ts). An idle spare is internal: listings leave it out unless the caller filters on
 * this key, users may not set it, and it is removed when a run takes the spare, so the running sandbox is
 * listed and labelled exactly as an in-process run's.
 */
export const SPARE_LABEL = 'agentfense.spare';
