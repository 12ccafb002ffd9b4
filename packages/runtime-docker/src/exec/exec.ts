// One buffered command: launch an exec, collect output (capped), and turn how it ended into the
// contract's ExecResult — or into an error when the command never started (engine gone, container gone,
// an image without /bin/sh or setsid).
import { finished } from 'node:stream/promises';
import type { ExecAudit, ExecResult } from '@agentfense/protocol';
import { UnavailableError, collectOutput as takeOutput } from '@agentfense/protocol';
import type { CollectedOutput, OutputCallback } from '@agentfense/protocol';
import type { ContainerCgroup } from '../container/cgroup.js';
import { CONTAINER_GONE, engineError, isEngineUnreachable } from '../engine/engine-errors.js';
import { launchExec } from './launch.js';
import type { LaunchOptions, LaunchedExec } from './launch.js';

/** Exit status of a process killed by SIGKILL, as the wrapper (like any shell) reports it. */
const SIGKILL_STATUS = 137;

export interface RunExecOptions extends Omit<LaunchOptions, 'mode'> {
  readonly audit: ExecAudit;
  readonly image: string;
  readonly maxOutputBytes: number;
  /** The container's cgroups seen from the host (null: not visible; then no OOM detection). */
  readonly cgroup: Promise<ContainerCgroup | null>;
  /** Watch the OOM counter (the sandbox has a memory limit). */
  readonly watchOom: boolean;
  readonly onStdout?: OutputCallback;
  readonly onStderr?: OutputCallback;
  /** false: nothing kept for the result, no cap (ExecOptions.keepOutput). */
  readonly keepOutput?: boolean;
}

/** Runs one command to completion (or timeout/abort) and reports how it ended. */
export async function runExec(options: RunExecOptions): Promise<ExecResult> {
  const { logger } = options;
  // Read the OOM counter while docker exec starts: adds no latency to the command.
  const oomBefore = options.watchOom
    ? options.cgroup.then((cg) => cg?.oomKills() ?? null)
    : Promise.resolve(null);
  const started = performance.now();
  const launched = await launchExec({ ...options, mode: 'exec' });
  const stdout = collect(launched.stdout, options, launched);
  const stderr = collect(launched.stderr, options, launched);
  await launched.exited;
  // The parser re-emits stderr after the stream ended: wait until both have delivered everything.
  await Promise.all([launched.stdout, launched.stderr].map((s) => finished(s).catch(() => undefined)));
  const exitCode0 = await launched.exitCode;
  const durationMs = performance.now() - started;
  const session = await launched.session;
  if (session === null) {
    // The wrapper never ran: the engine could not start the exec (it says why in the stream).
    const said = [launched.stderr.preamble, stdout.toBuffer(), stderr.toBuffer()].map(String).join('');
    notStarted(said, options);
  } else if (launched.stderr.preamble.length > 0) {
    logger.warn({ said: launched.stderr.preamble.toString() }, 'the engine printed a warning');
  }
  if (session !== null) {
    // Anything of the session that left the command's process group (the wrapper killed the group).
    const cgroup = await options.cgroup;
    if (cgroup !== null) await cgroup.killSession(session);
  }

  // A command we killed (timeout, abort) has no exit status of its own, whatever its shell managed to
  // return while its processes were being killed (a `wait` whose children died first returns 0). Report
  // it as bwrap does: killed by SIGKILL.
  const killed = launched.reason() !== null;
  const exitCode = killed ? null : exitCode0;
  const signal = killed ? 'SIGKILL' : null;
  const before = await oomBefore;
  const oomKilled =
    options.watchOom &&
    exitCode === SIGKILL_STATUS &&
    before !== null &&
    ((await (await options.cgroup)?.oomKills()) ?? before) > before;
  return {
    stdout: stdout.toBuffer(),
    stderr: stderr.toBuffer(),
    exitCode,
    signal,
    timedOut: launched.reason() === 'timeout',
    cancelled: launched.reason() === 'abort',
    oomKilled,
    durationMs: Math.max(durationMs, Number.MIN_VALUE),
    audit: options.audit,
  };
}

/**
 * Throws the error that explains why the wrapper never started, or returns when it was the command's own
 * failure to start (e.g. the pids limit is exhausted: the result then carries the engine's message).
 */
function notStarted(stderr: string, options: RunExecOptions): void {
  const context = { action: 'running a command', cli: options.api, image: options.image };
  if (isEngineUnreachable(stderr)) throw engineError(stderr, context);
  if (CONTAINER_GONE.test(stderr)) {
    throw engineError(stderr, context);
  }
  if (/setsid/.test(stderr) && /not found|No such file/i.test(stderr)) {
    throw new UnavailableError(
      `image ${options.image} has no \`setsid\` (util-linux or busybox), which runs each command in its own ` +
        'session so a timeout can kill its whole tree',
    );
  }
  if (/\/bin\/sh/.test(stderr) && /no such file|not found/i.test(stderr)) {
    throw new UnavailableError(`image ${options.image} has no /bin/sh, which every command runs under`);
  }
}

/**
 * Collects a stream's output up to the cap and streams it with back-pressure (the protocol's
 * collectOutput); output that does not fit kills the command.
 */
export function collectOutput(
  stream: NodeJS.ReadableStream,
  options: {
    readonly maxOutputBytes: number;
    readonly keepOutput?: boolean;
    readonly callback: OutputCallback | undefined;
    readonly logger: RunExecOptions['logger'];
    readonly kill: (why: 'output-limit') => void;
  },
): CollectedOutput {
  return takeOutput(stream, {
    cap: options.maxOutputBytes,
    ...(options.keepOutput === undefined ? {} : { keep: options.keepOutput }),
    callback: options.callback,
    onOverflow: () => {
      options.logger.warn({ limit: options.maxOutputBytes }, 'command output exceeded the cap: killing it');
      options.kill('output-limit');
    },
    onCallbackError: (err) =>
      options.logger.warn({ err }, 'an output callback failed; output is still collected'),
  });
}

/** collectOutput for an engine exec. */
function collect(
  stream: NodeJS.ReadableStream,
  options: RunExecOptions,
  launched: LaunchedExec,
): CollectedOutput {
  return collectOutput(stream, {
    maxOutputBytes: options.maxOutputBytes,
    ...(options.keepOutput === undefined ? {} : { keepOutput: options.keepOutput }),
    callback: stream === launched.stdout ? options.onStdout : options.onStderr,
    logger: options.logger,
    kill: (why) =>
      void launched.terminate(why).catch((err: unknown) => {
        options.logger.warn({ err }, 'could not kill a command over its output cap');
      }),
  });
}
