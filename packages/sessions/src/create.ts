// createSession(): start the shell through the runtime contract, install the protocol, wait until ready.
import { randomBytes } from 'node:crypto';
import type { RuntimeInstance } from '@agentfense/protocol';
import { InternalError, TimeoutError, UnavailableError } from '@agentfense/protocol';
import { ShellChannel } from './channel.js';
import { newNonce } from './nonce.js';
import { resolveCreateOptions } from './options.js';
import type { CreateSessionOptions } from './options.js';
import { relayFrame, sessionArgv, setupScript } from './script.js';
import { Session } from './session.js';

/** Starting a sandbox process and a shell takes ~15 ms; the bound is for a host under heavy load. */
export const STARTUP_TIMEOUT_MS = 15_000;
/** The status of a shell that could not be executed (`exec` of a missing file). */
const COMMAND_NOT_FOUND = 127;

/**
 * Starts a persistent shell in `instance` and resolves once it has run the protocol setup. Throws
 * InvalidArgumentError for bad options, UnavailableError when the shell does not exist in the sandbox,
 * TimeoutError when it does not come up in time.
 */
export async function createSession(
  instance: Pick<RuntimeInstance, 'sandboxId' | 'spawn'>,
  options: CreateSessionOptions = {},
): Promise<Session> {
  const resolved = resolveCreateOptions(options);
  // Private per session: holds the FIFO (removed once open) and the stdin file of commands.
  const dir = `/tmp/.agentfense-session-${randomBytes(8).toString('hex')}`;
  const proc = await instance.spawn({
    argv: sessionArgv({ shell: resolved.shell, dir }),
    ...(resolved.env === undefined ? {} : { env: resolved.env }),
    ...(resolved.cwd === undefined ? {} : { cwd: resolved.cwd }),
  });
  const channel = new ShellChannel({
    proc,
    maxOutputBytes: resolved.maxOutputBytes,
    logger: resolved.logger,
  });
  const ready = newNonce();
  channel.watch(ready);
  channel.write(relayFrame(setupScript({ dir, readyNonce: ready })));
  const outcome = await channel.waitForTrailer([ready], performance.now() + STARTUP_TIMEOUT_MS);
  if (outcome.kind === 'trailer') {
    // What the shell printed before it was set up (job-control warnings, the first prompt) is noise.
    channel.takeUpTo(outcome);
    return new Session({ options: resolved, sandboxId: instance.sandboxId, channel });
  }
  if (outcome.kind === 'deadline') {
    await channel.kill();
    throw new TimeoutError(
      `session shell ${resolved.shell} did not start within ${STARTUP_TIMEOUT_MS} ms in sandbox ${instance.sandboxId}`,
    );
  }
  const stderr = channel.stderr.flush().data.toString('utf8').trim();
  const detail = `exit status ${String(outcome.exit.exitCode ?? outcome.exit.signal)}${stderr === '' ? '' : `: ${stderr}`}`;
  if (outcome.exit.exitCode === COMMAND_NOT_FOUND) {
    throw new UnavailableError(
      `session shell ${resolved.shell} is not available in sandbox ${instance.sandboxId} (${detail})`,
    );
  }
  throw new InternalError(`session shell ${resolved.shell} exited while starting (${detail})`);
}
