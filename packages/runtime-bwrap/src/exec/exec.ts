// One buffered command: launch bwrap, collect output, and turn execa's result into the contract's ExecResult.
import type { ExecAudit, ExecResult } from '@agentfense/protocol';
import { InternalError, UnavailableError } from '@agentfense/protocol';
import { launchBwrap } from './launch.js';
import type { LaunchOptions } from './launch.js';

export interface RunExecOptions extends Omit<LaunchOptions, 'mode'> {
  readonly audit: ExecAudit;
}

/** Runs one command to completion (or timeout/abort) and reports how it ended. */
export async function runExec(options: RunExecOptions): Promise<ExecResult> {
  const { cgroup, audit } = options;
  // Read the OOM counter while bwrap starts (not after): adds no latency to the command.
  const watchOom = cgroup !== null && cgroup.limits.memoryBytes !== null;
  const oomBefore = watchOom ? cgroup.oomKills() : Promise.resolve(0);
  const launched = await launchBwrap({ ...options, mode: 'exec' });
  const result = await launched.subprocess;
  const reason = launched.reason();
  const exitCode = result.exitCode ?? null;
  const signal = result.signal ?? null;
  if (result.failed && exitCode === null && signal === null && reason === null) {
    // bwrap never ran (ENOENT, EACCES, EMFILE, ...): the host is at fault, not the command.
    const code = result.cause?.code;
    const message = `could not start bwrap (${options.bwrapPath}): ${result.shortMessage}`;
    if (code === 'ENOENT' || code === 'EACCES') {
      throw new UnavailableError(`${message}; install it with \`apt-get install bubblewrap\``, {
        cause: result.cause,
      });
    }
    throw new InternalError(message, { cause: result.cause });
  }
  // The OOM killer SIGKILLs its victim; bwrap reports a child killed by signal 9 as exit status 137.
  const killedLikeOom = exitCode === 137 || signal === 'SIGKILL';
  const oomKilled = watchOom && killedLikeOom && (await cgroup.oomKills()) > (await oomBefore);
  if (!watchOom) await oomBefore;
  return {
    stdout: Buffer.from(result.stdout),
    stderr: Buffer.from(result.stderr),
    exitCode,
    signal,
    timedOut: reason === 'timeout',
    cancelled: reason === 'abort',
    oomKilled,
    durationMs: result.durationMs,
    audit,
  };
}
