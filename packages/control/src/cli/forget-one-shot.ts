// The fast exit of `agentfense run` (the executable, a one-shot bwrap sandbox): once the command and
// everything asked for (--diff, --commit, --json) is done, the sandbox's record and the run's linked
// codebase record are deleted here, in one transaction of a few milliseconds, so the sandbox is gone from
// every listing when `run` returns, as before. What is physical — the worker and its FUSE mount (the
// worker unmounts itself when this process exits), the shared bind, the cgroups, the relay and the
// directory with the delta — is removed by the watchdog's reaper in the background of the exit
// (watchdog.ts, reaper.ts). The directory is marked first (SandboxPaths.forgotten): reapers remove only
// marked directories without a record, never one whose record is merely not written yet (create writes
// the record before the directory, but a sweep that lists directories while another process creates a
// sandbox cannot tell a record-less new directory from an old one by itself). A reaper that dies
// half-way leaves a marked directory to the next reaper (every `run` ends with one) or `agentfense gc`.
import { writeFileSync } from 'node:fs';
import { forgottenMarker } from '../sandboxes/forgotten.js';
import type { DataLayout } from '../paths.js';
import { openDatabase } from '../store/db.js';
import { forgetOneShotRecords } from '../store/sqlite-one-shot.js';

/** Deletes the records of a finished one-shot sandbox and its linked codebase (if nothing else uses it). */
export function forgetOneShot(
  layout: DataLayout,
  ids: { readonly sandboxId: string; readonly codebaseId: string },
): void {
  writeFileSync(layout.sandbox(ids.sandboxId).forgotten, forgottenMarker(), { mode: 0o600 });
  // A connection of its own: the control plane's stays as it is (this process exits right after).
  const db = openDatabase(layout.database);
  try {
    forgetOneShotRecords(db, ids);
  } finally {
    db.close();
  }
}
