// What the `agentfense` executable runs (bin/agentfense.js loads this module, bundled or as tsc built it):
// the order matters, so it lives in one place.
import { closeInheritedFds } from './inherited-fds.js';
import { discardEarlyWorker, startWorkerForRun } from './early-worker.js';
import type { CliMode } from './io.js';

// Before anything is spawned: no fd leaked to us may reach a sandbox through bwrap.
closeInheritedFds();
// `run` starts its FUSE worker now, so its node start-up overlaps the loading of the CLI below.
startWorkerForRun(process.argv.slice(2));
const { runCli } = await import('./main.js');
const mode: CliMode = { detachedCleanup: true, exitNow: false };
const status = await runCli(process.argv.slice(2), undefined, mode);
discardEarlyWorker();
// `run` left its sandbox to the detached reaper (src/cli/watchdog.ts): its worker connection and the
// rest would keep the event loop alive, and none of it is ours to wait for any more.
if (mode.exitNow === true) process.exit(status);
process.exitCode = status;
