// A long-lived process in the container (sessions): raw pipes, no buffering, kill() takes the whole tree.
import type { ExecAudit, SandboxProcess } from '@agentfense/protocol';
import { InternalError, toSandboxProcess } from '@agentfense/protocol';
import { engineError } from '../engine/engine-errors.js';
import { launchExec } from './launch.js';
import type { LaunchOptions } from './launch.js';

export interface RunSpawnOptions extends Omit<LaunchOptions, 'mode' | 'stdin' | 'timeoutMs' | 'signal'> {
  readonly audit: ExecAudit;
  readonly image: string;
}

/** Starts the process and returns its handle once it runs (its session header has arrived). */
export async function runSpawn(options: RunSpawnOptions): Promise<SandboxProcess> {
  const launched = await launchExec({ ...options, mode: 'spawn' });
  const { stdin, stdout, stderr } = launched;
  const session = await launched.session;
  if (stdin === null || session === null) {
    // It never ran: read what the engine said and explain.
    const said: Buffer[] = [stderr.preamble];
    stderr.on('data', (chunk: Buffer) => said.push(chunk));
    stdout.on('data', (chunk: Buffer) => said.push(chunk));
    await launched.exited;
    const text = Buffer.concat(said).toString();
    const err = engineError(text, { action: 'starting a process', cli: options.api, image: options.image });
    throw err instanceof InternalError ? new InternalError(`could not start a process: ${text.trim()}`) : err;
  }
  // The stream ends when the wrapper has exited, after killing what the command left in its process group.
  const exited = launched.exitCode.then((exitCode) => ({
    exitCode,
    signal: exitCode === null ? 'SIGKILL' : null,
  }));
  return toSandboxProcess({
    // The command's pid inside the container (its session id): the host never sees a client process.
    pid: session,
    stdin,
    stdout,
    stderr,
    audit: options.audit,
    exited,
    terminate: () => launched.terminate('kill'),
  });
}
