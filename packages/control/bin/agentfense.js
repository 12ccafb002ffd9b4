#!/usr/bin/env node
// The `agentfense` executable: runs the built CLI (run `pnpm build` after changing the sources).
import { closeInheritedFds } from '../dist/cli/inherited-fds.js';
import { discardEarlyWorker, startWorkerForRun } from '../dist/cli/early-worker.js';

// Before anything is spawned: no fd leaked to us may reach a sandbox through bwrap.
closeInheritedFds();
// `run` starts its FUSE worker now, so its node start-up overlaps the loading of the CLI below.
startWorkerForRun(process.argv.slice(2));
const { runCli } = await import('../dist/cli/main.js');
const mode = { detachedCleanup: true, exitNow: false };
const status = await runCli(process.argv.slice(2), undefined, mode);
discardEarlyWorker();
// `run` left its sandbox to the detached reaper (src/cli/watchdog.ts): its worker connection and the
// rest would keep the event loop alive, and none of it is ours to wait for any more.
if (mode.exitNow) process.exit(status);
process.exitCode = status;
