// One buffered command through the container's af-init (launcher.ts): a SPAWN on the launcher connection
// instead of an engine exec. Same contract as runExec (exec.ts): output capped and streamed, timeouts and
// aborts kill the command's whole session from the host through the container's cgroup, OOM read from the
// memory cgroup's counter, and whatever the command left in its session is swept when it ends.
import { finished } from 'node:stream/promises';
import type { LauncherClient, LauncherOutcome } from '@agentfense/launcher';
import type { ExecAudit, ExecResult, OutputCallback } from '@agentfense/protocol';
import { armTermination } from '@agentfense/protocol';
import type { ContainerCgroup } from '../container/cgroup.js';
import { collectOutput } from '../exec/exec.js';
import type { TerminationReason } from '../exec/launch.js';
import type { RuntimeLogger } from '../logger.js';

/** How long a killed command's EXIT may take before the command is given up on (af-init is hostile-able). */
const EXIT_AFTER_KILL_MS = 2_000;
/** Exit status of a process killed by SIGKILL, as the session wrapper (like any shell) reports it. */
const SIGKILL_STATUS = 137;

export interface InitExecOptions {
  readonly client: LauncherClient;
  readonly argv: readonly string[];
  readonly cwd: string;
  /** The complete environment of the command. */
  readonly env: Readonly<Record<string, string>>;
  readonly stdin?: Uint8Array;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  readonly onStdout?: OutputCallback;
  readonly onStderr?: OutputCallback;
  /** false: nothing kept for the result, no cap (ExecOptions.keepOutput). */
  readonly keepOutput?: boolean;
  readonly audit: ExecAudit;
  readonly maxOutputBytes: number;
  /** The container's cgroups seen from the host (required: kills go through it). */
  readonly cgroup: ContainerCgroup;
  /** Watch the OOM counter (the sandbox has a memory limit). */
  readonly watchOom: boolean;
  readonly logger: RuntimeLogger;
  /** True once the sandbox is being stopped (its container removed: af-init's connection closes). */
  readonly stopped: () => boolean;
}

/** Runs one command to completion (or timeout/abort) through af-init and reports how it ended. */
export async function runInitExec(o: InitExecOptions): Promise<ExecResult> {
  const { cgroup, logger } = o;
  const oomBefore = o.watchOom ? cgroup.oomKills() : null;
  const started = performance.now();
  const cmd = o.client.spawn({ argv: o.argv, cwd: o.cwd, env: o.env, stdin: o.stdin !== undefined });
  if (o.stdin !== undefined) cmd.stdin?.end(o.stdin);
  const settled = cmd.done.then(
    () => undefined,
    () => undefined,
  );

  // Kills the command's whole session from the host. A kill the cgroup gave up on (a session still forking
  // after every round, frozen ones included) is not left at that: af-init's SIGKILL of the command's
  // process group is a second, independent way (a no-op once the command ended), then the host tries once
  // more; what still survives is reported.
  const killSession = async (pid: number): Promise<void> => {
    if (await cgroup.killSession(pid)) return;
    cmd.signal('SIGKILL');
    if (await cgroup.killSession(pid)) return;
    logger.warn({ pid }, 'could not kill every process of a command session in the container');
  };

  let giveUp!: () => void;
  const gaveUp = new Promise<null>((resolve) => (giveUp = () => resolve(null)));
  let reason: TerminationReason = null;
  let terminating: Promise<void> | undefined;
  const terminate = (why: Exclude<TerminationReason, null>): Promise<void> => {
    reason ??= why;
    terminating ??= (async () => {
      const pid = await cmd.pid.catch(() => null);
      if (pid !== null) await killSession(pid);
      const gone = await Promise.race([
        settled.then(() => true),
        delay(EXIT_AFTER_KILL_MS).then(() => false),
      ]);
      if (!gone) {
        logger.warn({ pid }, 'af-init did not report a killed command: giving up on it');
        giveUp();
      }
    })();
    return terminating;
  };
  armTermination({
    timeoutMs: o.timeoutMs,
    signal: o.signal,
    terminate,
    onError: (err) => logger.warn({ err }, 'could not terminate a command'),
    ended: settled,
  });
  const kill = (why: 'output-limit'): void => void terminate(why);
  const stdout = collectOutput(cmd.stdout, { ...o, callback: o.onStdout, kill });
  const stderr = collectOutput(cmd.stderr, { ...o, callback: o.onStderr, kill });

  let outcome: LauncherOutcome | null;
  try {
    outcome = await Promise.race([cmd.done, gaveUp]);
  } catch (err) {
    // The connection died: the container was removed by stop() (the command was killed with it, as an
    // engine exec's is), or we were killing the command anyway. Otherwise af-init died: a clear error.
    if (reason === null && !o.stopped()) throw err;
    outcome = null;
  }
  if (outcome === null) {
    cmd.stdout.destroy();
    cmd.stderr.destroy();
  }
  await Promise.all([cmd.stdout, cmd.stderr].map((s) => finished(s).catch(() => undefined)));
  const durationMs = performance.now() - started;
  const pid = await cmd.pid.catch(() => null);
  // Anything of the session that outlived the command (background jobs, `set -m` groups): as the wrapper
  // of an engine exec did, nothing a command started survives it.
  if (pid !== null) await killSession(pid);

  if (outcome?.kind === 'failed') {
    // Never started: report it as a shell would (127 not found, 126 not executable), which is what a
    // command run through the wrapper's `exec` reported before.
    const said = Buffer.from(`agentfense: ${o.argv[0] ?? ''}: ${outcome.message}\n`);
    return {
      stdout: Buffer.alloc(0),
      stderr: said,
      exitCode: outcome.errno === 2 || outcome.errno === 20 ? 127 : 126,
      signal: null,
      timedOut: false,
      cancelled: false,
      oomKilled: false,
      durationMs: Math.max(durationMs, Number.MIN_VALUE),
      audit: o.audit,
    };
  }
  const killed = reason !== null;
  const exitCode =
    killed || outcome === null ? null : outcome.kind === 'exited' ? outcome.code : 128 + outcome.signal;
  const before = await oomBefore;
  const oomKilled =
    o.watchOom &&
    exitCode === SIGKILL_STATUS &&
    before !== null &&
    ((await cgroup.oomKills()) ?? before) > before;
  return {
    stdout: stdout.toBuffer(),
    stderr: stderr.toBuffer(),
    exitCode,
    signal: killed ? 'SIGKILL' : exitCode === null ? 'SIGKILL' : null,
    timedOut: reason === 'timeout',
    cancelled: reason === 'abort',
    oomKilled,
    durationMs: Math.max(durationMs, Number.MIN_VALUE),
    audit: o.audit,
  };
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
