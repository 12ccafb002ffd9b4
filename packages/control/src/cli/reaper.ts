// The reaper of `agentfense run` (started by its watchdog, watchdog.ts, once the CLI has exited without
// cleaning up): `node reaper.js --data DIR --owner PID [--codebase ID]`. Waits until the CLI process is
// really gone (its pipe closes a moment before it becomes a zombie), then:
//   - opens the control plane, whose recovery kills and removes every dead one-shot sandbox of the data
//     directory (a SIGKILLed run's: its command dies through the sandbox's cgroups), and finishes the
//     commit of one killed in the middle of `--commit` (removed afterwards unless conflicts are left,
//     kept for its user otherwise: sandboxes/recovery.ts);
//   - removes every sandbox directory a fast exit forgot (marked, no record: forget-one-shot.ts), this
//     run's and any an earlier reaper did not finish: its mounts, cgroups and relay (the bwrap runtime's
//     leftovers), then the directory; not one whose marker's writer still runs (sandboxes/forgotten.ts);
//   - removes the linked codebase the run made for itself, unless something uses it by now.
// Not `gc`: its sweep of record-less directories and mounts cannot tell them from a sandbox another
// process is creating at that moment, and every run ends with a reaper, concurrent runs included.
// Output goes to the control log (and stderr, which the watchdog discards).
import { readFile, readdir } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { removeTree } from '@agentfense/fuse-worker';
import { AgentFenseError, NotFoundError } from '@agentfense/protocol/core';
import type { ControlPlane } from '../control-plane.js';
import { markerWriterAlive } from '../sandboxes/forgotten.js';
import { unfinishedCommit } from '../sandboxes/pending-commit.js';
import { processStartTime } from '../sandboxes/process-identity.js';

/** How long to wait for the CLI to finish exiting. */
const OWNER_EXIT_MS = 5_000;

/** True while `id` has a record (NotFoundError: it has none). */
async function recorded(plane: ControlPlane, id: string): Promise<boolean> {
  try {
    await plane.getSandbox(id);
    return true;
  } catch (err) {
    if (err instanceof NotFoundError) return false;
    throw err;
  }
}

/** Sandbox directories a fast exit forgot: marked, and without a record (checked after the mark). */
async function forgottenSandboxes(plane: ControlPlane): Promise<string[]> {
  const found: string[] = [];
  for (const name of await readdir(plane.layout.sandboxesDir).catch(() => [] as string[])) {
    if (!/^sb_[0-9a-f-]+$/.test(name)) continue;
    const marker = await readFile(plane.layout.sandbox(name).forgotten, 'utf8').catch(() => undefined);
    // A live writer (the run helper, tearing it down after its answer) removes it itself. A marked
    // directory never holds an unfinished commit (a run forgets its sandbox only after a whole commit);
    // one that does anyway is left to `agentfense gc`, which says so.
    if (marker === undefined || markerWriterAlive(marker) || (await recorded(plane, name))) continue;
    if ((await unfinishedCommit(plane.layout, name, plane.logger)) === null) found.push(name);
  }
  return found;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      data: { type: 'string' },
      owner: { type: 'string' },
      codebase: { type: 'string', multiple: true, default: [] },
    },
    strict: true,
  });
  const owner = Number(values.owner);
  const deadline = Date.now() + OWNER_EXIT_MS;
  while (processStartTime(owner) !== undefined && Date.now() < deadline) await sleep(5);
  const { ControlPlane } = await import('../control-plane.js');
  // Recovery runs inside open(): the dead run's sandbox is settled and, being one-shot, destroyed.
  const plane = await ControlPlane.open({
    ...(values.data === undefined ? {} : { dataDir: values.data }),
    workerPoolSize: 0,
    reapIntervalMs: 0,
    // The run asked for its commit: one it was killed in the middle of is finished now.
    unfinishedCommits: 'finish',
  });
  try {
    for (const id of await forgottenSandboxes(plane)) {
      try {
        // Only bwrap's leftovers (the fast exit is bwrap's): clearing an unknown runtime's would load
        // every runtime (Docker's client) to ask each.
        await plane.sandboxes.clearMountsOf(id, 'bwrap');
        await removeTree(plane.layout.sandbox(id).dir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // removed meanwhile: done
        if (!(err instanceof AgentFenseError)) throw err;
        plane.logger.warn({ err, sandboxId: id }, 'reaper: sandbox leftovers not removed');
      }
    }
    for (const id of values.codebase) {
      try {
        // Only a link (a record; the directory is the user's), and refused while a sandbox still uses
        // it (WrongStateError): then it is not ours to remove.
        if ((await plane.getCodebase(id)).kind === 'linked') await plane.deleteCodebase(id);
      } catch (err) {
        if (err instanceof NotFoundError) continue; // removed with the sandbox's record (the fast exit)
        if (!(err instanceof AgentFenseError)) throw err;
        plane.logger.warn({ err, codebaseId: id }, 'reaper: linked codebase left in place');
      }
    }
  } finally {
    await plane.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(
    `agentfense reaper: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exitCode = 1;
});
