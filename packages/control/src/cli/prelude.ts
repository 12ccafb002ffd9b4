// What the `agentfense` executable does before it loads the CLI (bin/agentfense.js imports this first,
// then bin.ts). Kept apart, and bundled on its own (scripts/bundle-cli.js), so that `run`'s worker is
// spawned after loading a few kilobytes, not the CLI's shared chunks (the permission engine, picomatch).
import { closeInheritedFds } from './inherited-fds.js';
import { startWorkerForRun } from './early-worker.js';

/** Closes leaked fds and starts `run`'s worker; `argv` without node and script. */
export function prelude(argv: readonly string[]): void {
  // Before anything is spawned: no fd leaked to us may reach a sandbox through bwrap.
  closeInheritedFds();
  // `run` starts its FUSE worker now, so its node start-up overlaps the loading of the CLI.
  startWorkerForRun(argv);
}
