// The reaper of `agentfense run` (started by its watchdog, watchdog.ts, once the CLI has exited without
// cleaning up): `node reaper.js --data DIR --owner PID [--sandbox ID] [--codebase ID]`. Waits until the
// CLI process is really gone (its pipe closes a moment before it becomes a zombie), then:
//   - opens the control plane, whose recovery kills and removes every dead one-shot sandbox of the data
//     directory (a SIGKILLed run's: its command dies through the sandbox's cgroups);
//   - removes the run's sandbox if its record is gone (the fast exit, forget-one-shot.ts): its mounts,
//     cgroups and relay (the bwrap runtime's leftovers), then its directory;
//   - collects garbage without touching codebases (sandboxes/gc.ts): whatever an earlier reaper that died
//     half-way left;
//   - removes the linked codebase the run made for itself, unless something uses it by now.
// Output goes to the control log (and stderr, which the watchdog discards).
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { removeTree } from '@agentfense/fuse-worker';
import { AgentFenseError, NotFoundError } from '@agentfense/protocol/core';
import type { ControlPlane } from '../control-plane.js';
import { processStartTime } from '../sandboxes/process-identity.js';

/** How long to wait for the CLI to finish exiting. */
const OWNER_EXIT_MS = 5_000;

/** True while `id` has a record (NotFoundError: it has none). */
function recorded(plane: ControlPlane, id: string): boolean {
  try {
    plane.getSandbox(id);
    return true;
  } catch (err) {
    if (err instanceof NotFoundError) return false;
    throw err;
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      data: { type: 'string' },
      owner: { type: 'string' },
      sandbox: { type: 'string', multiple: true, default: [] },
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
  });
  try {
    for (const id of values.sandbox) {
      try {
        // Still recorded (recovery could not remove it): it is the control plane's to handle, not ours.
        if (recorded(plane, id)) continue;
        // Only the run's own runtime (bwrap: the fast exit is bwrap's) clears its leftovers: gc's sweep
        // of a directory without a record would load every runtime (Docker's client) to ask each.
        await plane.sandboxes.clearMountsOf(id, 'bwrap');
        await removeTree(plane.layout.sandbox(id).dir);
      } catch (err) {
        if (!(err instanceof AgentFenseError)) throw err;
        plane.logger.warn({ err, sandboxId: id }, 'reaper: sandbox leftovers not removed');
      }
    }
    await plane.gc({ codebases: false });
    for (const id of values.codebase) {
      try {
        // Only a link (a record; the directory is the user's), and refused while a sandbox still uses
        // it (WrongStateError): then it is not ours to remove.
        if (plane.getCodebase(id).kind === 'linked') await plane.deleteCodebase(id);
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
