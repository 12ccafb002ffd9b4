// A long-lived process in the sandbox (sessions): raw pipes, no buffering, kill() takes the whole tree.
import type { ExecAudit, SandboxProcess } from '@agentfense/protocol';
import { InternalError } from '@agentfense/protocol';
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
  return {
    pid,
    stdin: stdin,
    stdout: stdout,
    stderr: stderr,
    audit: options.audit,
    wait: () => exited,
    kill: async () => {
      // Kills the sandbox's pid 1 (the kernel then kills its whole pid namespace) and the outer bwrap.
      await launched.terminate('kill');
      // The caller no longer wants the output: drain what is left so the streams can end and execa settle.
      stdout.resume();
      stderr.resume();
      await exited;
    },
  };
}
