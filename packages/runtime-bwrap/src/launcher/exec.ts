// One buffered command through the sandbox's launcher (launcher.ts): the same ExecResult as a per-exec
// bwrap (exec/exec.ts), from af-init's answers instead of bwrap's exit.
import { constants } from 'node:os';
import type { Readable } from 'node:stream';
import type { LauncherOutcome } from '@agentfense/launcher';
import type { ExecAudit, ExecIo, ExecResult } from '@agentfense/protocol';
import {
  DEFAULT_MAX_OUTPUT_BYTES,
  UnavailableError,
  armTermination,
  collectOutput,
} from '@agentfense/protocol';
import type { SandboxCgroup } from '../cgroups/types.js';
import type { SandboxLauncher } from './launcher.js';
import type { RuntimeLogger } from '../logger.js';

export interface LauncherExecOptions extends ExecIo {
  readonly launcher: SandboxLauncher;
  readonly argv: readonly string[];
  readonly cwd: string;
  /** The complete environment of the command. */
  readonly env: Readonly<Record<string, string>>;
  readonly cgroup: SandboxCgroup | null;
  readonly maxOutputBytes?: number;
  readonly audit: ExecAudit;
  readonly logger: RuntimeLogger;
}

/** Exit status of a command that never started, as a shell reports it (127: not found, 126: not runnable). */
function notStartedStatus(errno: number): number {
  return errno === constants.errno.ENOENT ? 127 : 126;
}

/** Runs one command to completion (or timeout/abort/output cap) and reports how it ended. */
export async function runLauncherExec(options: LauncherExecOptions): Promise<ExecResult> {
  const started = performance.now();
  const { cgroup } = options;
  const watchOom = cgroup !== null && cgroup.limits.memoryBytes !== null;
  // A counter that cannot be read (the cgroup removed by a stop racing this command) means no OOM report,
  // never a failed command: the command's own outcome stands.
  const oomBefore = watchOom ? cgroup.oomKills().catch(() => null) : Promise.resolve(null);
  const run = await options.launcher.spawn({
    argv: options.argv,
    cwd: options.cwd,
    env: options.env,
    stdin: options.stdin !== undefined,
  });
  const { command } = run;
  if (options.stdin !== undefined && command.stdin !== null) {
    // A command that does not read its stdin ends first: the bytes have nowhere to go, not an error.
    command.stdin.on('error', () => undefined);
    command.stdin.end(options.stdin);
  }
  let reason: 'timeout' | 'abort' | null = null;
  let isMaxBuffer = false;
  let ending: Promise<void> | undefined;
  const end = (): Promise<void> => (ending ??= run.terminate());
  const cap = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const collect = (stream: Readable, callback: ExecIo['onStdout']): (() => Buffer) => {
    const output = collectOutput(stream, {
      cap,
      ...(options.keepOutput === undefined ? {} : { keep: options.keepOutput }),
      callback,
      onOverflow: () => {
        // Both streams stop at the first overflow: the command is being stopped.
        if (isMaxBuffer) return;
        isMaxBuffer = true;
        void end().catch((err: unknown) =>
          options.logger.warn({ err }, 'could not stop a command past its output cap'),
        );
      },
      onCallbackError: (err) =>
        options.logger.warn({ err }, 'an output callback failed; output is still collected'),
    });
    return () => output.toBuffer();
  };
  const stdout = collect(command.stdout, options.onStdout);
  const stderr = collect(command.stderr, options.onStderr);
  const endOf = (stream: Readable): Promise<void> =>
    new Promise((resolve) => {
      stream.once('end', resolve).once('close', resolve);
    });
  const ended = Promise.all([endOf(command.stdout), endOf(command.stderr)]);
  armTermination({
    timeoutMs: options.timeoutMs,
    signal: options.signal,
    terminate: (why) => {
      reason ??= why;
      return end();
    },
    onError: (err) => options.logger.warn({ err }, 'could not terminate a command'),
    ended: command.done.catch(() => undefined),
  });

  let outcome: LauncherOutcome | 'launcher-gone';
  try {
    outcome = await command.done;
  } catch (err) {
    // The launcher died under the command (stop(), a crash, a command that killed it): its namespace died
    // with it, so the command was killed. Reported as a kill, as a per-exec bwrap killed by stop() is.
    if (!(err instanceof UnavailableError)) throw err;
    outcome = 'launcher-gone';
  }
  // Whatever it started and left behind dies now, as it did with its own pid namespace.
  await run.finish();
  if (outcome !== 'launcher-gone') await ended;
  const killedByUs = reason !== null || isMaxBuffer || outcome === 'launcher-gone';
  let exitCode: number | null = null;
  let signal: NodeJS.Signals | null = null;
  let stderrText = stderr();
  if (outcome === 'launcher-gone') {
    signal = 'SIGKILL';
  } else if (outcome.kind === 'exited') {
    exitCode = outcome.code;
  } else if (outcome.kind === 'signaled') {
    // As bwrap's init reports it: a signal from inside is the shell's 128+n; one we sent is the signal.
    if (killedByUs) signal = signalName(outcome.signal) ?? 'SIGKILL';
    else exitCode = 128 + outcome.signal;
  } else {
    exitCode = notStartedStatus(outcome.errno);
    stderrText = Buffer.concat([stderrText, Buffer.from(`${outcome.message}\n`)]);
  }
  const killedLikeOom = exitCode === 137 || signal === 'SIGKILL';
  const before = await oomBefore;
  const after = watchOom && killedLikeOom ? await cgroup.oomKills().catch(() => null) : null;
  const oomKilled = before !== null && after !== null && after > before;
  return {
    stdout: stdout(),
    stderr: stderrText,
    exitCode,
    signal,
    timedOut: reason === 'timeout',
    cancelled: reason === 'abort',
    oomKilled,
    durationMs: performance.now() - started,
    audit: options.audit,
  };
}

function signalName(signo: number): NodeJS.Signals | undefined {
  for (const [name, value] of Object.entries(constants.signals))
    if (value === signo) return name as NodeJS.Signals;
  return undefined;
}
