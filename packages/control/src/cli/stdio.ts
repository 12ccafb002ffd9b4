// The executable's own stdout and stderr when they are pipes. A reader that went away (EPIPE, as in
// `agentfense run … | head -1`) ends our writing to it quietly, as SIGPIPE ends other CLIs, instead of an
// uncaught 'error' with a stack trace; the command itself runs on (its output is dropped). And an exit
// through process.exit waits until a slow reader has taken everything written: process.exit drops what
// libuv still queues for a full pipe.
import { setTimeout as sleep } from 'node:timers/promises';

const STREAMS = [process.stdout, process.stderr];

/** Installs the EPIPE handling (once, first thing in the executable). */
export function quietOnClosedReader(): void {
  for (const stream of STREAMS) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') return; // the stream is destroyed; later writes are dropped
      if (stream !== process.stderr && !process.stderr.destroyed)
        process.stderr.write(`agentfense: cannot write to standard output: ${err.message}\n`);
    });
  }
}

/** Resolves once stdout and stderr hold nothing unwritten (or are closed). */
export async function flushStdio(): Promise<void> {
  // Polled, not 'drain': drain only follows a write that returned false, and a short tail never does.
  while (STREAMS.some((stream) => !stream.destroyed && stream.writableLength > 0)) await sleep(10);
}
