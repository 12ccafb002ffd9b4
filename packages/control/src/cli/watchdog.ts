// What `agentfense run` leaves when it exits without tearing its sandbox down itself: on purpose (the
// fast exit: a one-shot sandbox is removed in the background of the exit) or not (SIGKILL, a crash). A
// watchdog armed before the sandbox starts covers both: a detached `sh` holding the read end of a pipe
// whose only writer is this process. Whatever ends the CLI closes the pipe, and unless the CLI said
// "done" first (it cleaned up itself), the shell execs the reaper (reaper.ts): a node process that runs
// the control plane's recovery on the data directory, which kills what is left in the sandbox's cgroups
// (a SIGKILLed run's command: bwrap's --die-with-parent does not always fire with the sandbox user's
// nested user namespace), clears its mounts and, the sandbox being one-shot, removes it and its linked
// codebase. A reaper that dies half-way is finished by the next invocation's recovery, as before.
//
// The shell costs ~2 ms and no node start-up while the command runs; the script is a constant and every
// value travels as an argument, never inside a shell string.
import { spawn } from 'node:child_process';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

/**
 * Reads lines until EOF: "done" means the CLI cleaned up itself; "codebase ID" names the codebase the run
 * linked, passed on to the reaper as `--codebase ID` (which validates it).
 */
const WATCHDOG_SCRIPT =
  'while read -r kind id; do [ "$kind" = done ] && exit 0; set -- "$@" "--$kind" "$id"; done; exec "$@"';

/**
 * The reaper's entry, next to this file: dist/cli/reaper.js, or dist/bundle/reaper.js when this code runs
 * from the bundle (scripts/bundle-cli.js leaves this URL relative to the bundle).
 */
const REAPER = fileURLToPath(new URL('./reaper.js', import.meta.url));

export interface Watchdog {
  /** The run linked this codebase for itself: a reaper removes its record too. */
  made(kind: 'codebase', id: string): void;
  /** The CLI cleaned up after itself: the watchdog exits without reaping. */
  disarm(): void;
}

/** Arms the watchdog of a `run` on `dataDir`. */
export function armWatchdog(options: { dataDir: string }): Watchdog {
  const child = spawn(
    '/bin/sh',
    [
      '-c',
      WATCHDOG_SCRIPT,
      'agentfense-watchdog',
      process.execPath,
      REAPER,
      '--data',
      options.dataDir,
      '--owner',
      String(process.pid),
    ],
    // Its own session: a Ctrl-C to the terminal's process group must not take it down with the CLI.
    { detached: true, stdio: ['pipe', 'ignore', 'ignore'] },
  );
  child.on('error', () => undefined); // no /bin/sh: recovery falls to the next invocation, as before
  const pipe = child.stdin as Writable | null;
  pipe?.on('error', () => undefined);
  child.unref();
  (pipe as unknown as { unref?: () => void } | null)?.unref?.();
  return {
    made: (kind, id) => {
      pipe?.write(`${kind} ${id}\n`);
    },
    disarm: () => {
      pipe?.end('done\n');
    },
  };
}
