// A long-lived process in the sandbox (sessions): raw pipes, no buffering, kill() takes the whole tree.
import type { ExecAudit, SandboxProcess } from '@agentfense/protocol';
import { InternalError, toSandboxProcess } from '@agentfense/protocol';
import { launchBwrap } from './launch.js';
import type { LaunchOptions } from './launch.js';

export interface RunSpawnOptions extends Omit<
  LaunchOptions,
  'mode' | 'stdin' | 'timeoutMs' | 'signal' | 'onStdout' | 'onStderr'
> {
  readonly audit: ExecAudit;
}

/** Starts the process and returns its handle once it runs inside its cgroups. */
export async function runSpawn(options: RunSpawnOptions): Promise<SandboxProcess> {
  const launched = await launchBwrap({ ...options, mode: 'spawn' });
  const { subprocess } = launched;
  const { pid, stdin, stdout, stderr } = subprocess;
  if (pid === undefined || stdin === null || stdout === null || stderr === null) {
    const result = await subprocess;
    throw new InternalError(`could not start bwrap: ${result.shortMessage}`, { cause: result.cause });
  }
  // execa resolves (reject: false) when bwrap exits; bwrap exits only after its pid namespace is torn
  // down (the namespace's pid 1 dies with it), so the process tree is gone when this settles.
  const exited = subprocess.then((result) => ({
    exitCode: result.exitCode ?? null,
    signal: result.signal ?? null,
  }));
  return toSandboxProcess({
    pid,
    stdin,
    stdout,
    stderr,
    audit: options.audit,
    exited,
    // Kills the sandbox's pid 1 (the kernel then kills its whole pid namespace) and the outer bwrap.
    terminate: () => launched.terminate('kill'),
  });
}
