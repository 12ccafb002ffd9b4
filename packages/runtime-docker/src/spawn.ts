// A long-lived process in the container (sessions): raw pipes, no buffering, kill() takes the whole tree.
import type { ExecAudit, SandboxProcess } from '@agentfense/protocol';
import { InternalError, UnavailableError } from '@agentfense/protocol';
import { engineError } from './engine.js';
import { launchExec } from './launch.js';
import type { LaunchOptions } from './launch.js';

export interface RunSpawnOptions extends Omit<LaunchOptions, 'mode' | 'stdin' | 'timeoutMs' | 'signal'> {
  readonly audit: ExecAudit;
  readonly image: string;
}

/** Starts the process and returns its handle once it runs (its session header has arrived). */
export async function runSpawn(options: RunSpawnOptions): Promise<SandboxProcess> {
  const launched = launchExec({ ...options, mode: 'spawn' });
  const { subprocess, stdout, stderr } = launched;
  const { pid, stdin } = subprocess;
  const session = await launched.session;
  if (pid === undefined || stdin === null || session === null) {
    // It never ran: read what the CLI said and explain.
    const said: Buffer[] = [];
    stderr.on('data', (chunk: Buffer) => said.push(chunk));
    stdout.resume();
    const result = await subprocess;
    if (result.exitCode === undefined && result.signal === undefined) {
      throw new UnavailableError(
        `could not run the docker CLI (${options.cli.path}): ${result.shortMessage}`,
        {
          cause: result.cause,
        },
      );
    }
    const text = Buffer.concat(said).toString();
    const err = engineError(text, { action: 'starting a process', cli: options.cli, image: options.image });
    throw err instanceof InternalError ? new InternalError(`could not start a process: ${text.trim()}`) : err;
  }
  // execa settles (reject: false) when the CLI exits, which is when the wrapper has exited, after killing
  // what the command left in its process group.
  const exited = subprocess.then((result) => ({
    exitCode: result.exitCode ?? null,
    signal: result.signal ?? null,
  }));
  return {
    pid,
    stdin,
    stdout,
    stderr,
    audit: options.audit,
    wait: () => exited,
    kill: async () => {
      await launched.terminate('kill');
      // The caller no longer wants the output: drain what is left so the streams can end and execa settle.
      stdout.resume();
      stderr.resume();
      await exited;
    },
  };
}
