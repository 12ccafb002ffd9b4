// What the `agentfense` executable does before it loads the CLI (bin/agentfense.js imports this first,
// then bin.ts unless the run helper took the command). Kept apart, and bundled on its own
// (scripts/bundle-cli.js), so that `run` reaches its helper, or spawns its worker, after loading a few
// kilobytes, not the CLI's shared chunks (the permission engine, picomatch).
import { closeInheritedFds } from './inherited-fds.js';
import { quietOnClosedReader } from './stdio.js';
import { startWorkerForRun } from './early-worker.js';
import { runThroughHelper } from './run-helper/client.js';

/**
 * Closes leaked fds, then hands a `run` to the data directory's run helper when one is there; resolves
 * with the exit status if it did, else undefined (the CLI runs the command line, `run`'s worker already
 * starting). `argv` without node and script.
 */
export async function prelude(argv: readonly string[]): Promise<number | undefined> {
  // Before anything is spawned or connected: no fd leaked to us may reach a sandbox or the helper.
  closeInheritedFds();
  quietOnClosedReader();
  const status = await runThroughHelper(argv);
  if (status !== undefined) return status;
  // `run` starts its FUSE worker now, so its node start-up overlaps the loading of the CLI.
  startWorkerForRun(argv);
  return undefined;
}
