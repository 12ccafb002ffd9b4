// What the `agentfense` executable runs after its prelude (prelude.ts; bin/agentfense.js loads both,
// bundled or as tsc built them).
import { discardEarlyWorker } from './early-worker.js';
import type { CliMode } from './io.js';
import { flushStdio } from './stdio.js';

const { runCli } = await import('./main.js');
const mode: CliMode = { detachedCleanup: true, exitNow: false };
const status = await runCli(process.argv.slice(2), undefined, mode);
discardEarlyWorker();
// `run` left its sandbox to the detached reaper (src/cli/watchdog.ts): its worker connection and the
// rest would keep the event loop alive, and none of it is ours to wait for any more.
// What a slow reader of a pipe has not taken yet is written first (process.exit would drop it).
if (mode.exitNow === true) {
  await flushStdio();
  process.exit(status);
}
process.exitCode = status;
