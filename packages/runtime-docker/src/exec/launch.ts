// Starts one command through the Engine API (exec create → start on a hijacked connection → exec inspect)
// and owns the one way to end it.
//
// Ending a command is not closing its connection: a dropped exec stream leaves the process running in the
// container. So terminate() waits for the wrapper's session header (the command's session id inside the
// container), kills that session (the runtime decides how: from the host through the container's cgroup,
// or with an in-container kill script), and only then waits for the stream, which ends once the wrapper
// has exited. A stream still open after a grace period (something that left the session holds its pipes)
// is dropped: the command is dead by then, only its pipes are left.
import { PassThrough, Writable } from 'node:stream';
import type { Duplex, Readable } from 'node:stream';
import type { ExecCreateOptions, ExecInspectInfo } from 'dockerode';
import { armTermination } from '@agentfense/protocol';
import type { EngineApi } from '../engine/api.js';
import { apiError } from '../engine/engine-errors.js';
import { SessionHeaderParser } from './header.js';
import type { RuntimeLogger } from '../logger.js';
import { demultiplex } from '../engine/demux.js';

/** How long the stream gets to end after its command's session was killed before it is dropped. */
const STREAM_END_GRACE_MS = 2_000;
/** How long terminate() waits for the session header (an exec normally starts in ~30-80 ms). */
const SESSION_WAIT_MS = 20_000;
/** The exec's state can lag the end of its stream by a few ms: inspect is retried this long. */
const INSPECT_RETRY_MS = 5_000;

export interface LaunchOptions {
  readonly api: EngineApi;
  readonly containerId: string;
  /** The exec body (buildExecBody). */
  readonly body: ExecCreateOptions;
  /** 'exec': stdin from bytes or nothing. 'spawn': a raw stdin pipe. Output is never buffered here. */
  readonly mode: 'exec' | 'spawn';
  readonly stdin?: Uint8Array;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** Kills every process of a command's session (container-side id). */
  readonly killSession: (sessionId: number) => Promise<void>;
  readonly logger: RuntimeLogger;
  /** Called synchronously once the exec's stream is open, e.g. to track it for stop(). */
  readonly onSpawned?: (launched: LaunchedExec) => void;
}

/** Why we ended a command ourselves (null: it ended on its own or was killed from inside). */
export type TerminationReason = 'timeout' | 'abort' | 'kill' | 'output-limit' | null;

/** A running exec and the one way to end it. */
export interface LaunchedExec {
  /** spawn mode: the command's stdin (ending it half-closes the connection); exec mode: null. */
  readonly stdin: Writable | null;
  readonly stdout: Readable;
  /** The command's stderr, without the session header. */
  readonly stderr: SessionHeaderParser;
  /** The command's session id inside the container; null if the wrapper never ran. */
  readonly session: Promise<number | null>;
  /** Resolves when the stream has ended (never rejects). */
  readonly exited: Promise<void>;
  /** The exit code from exec inspect once the stream ended (null: unknown, e.g. the connection was dropped). */
  readonly exitCode: Promise<number | null>;
  /** Kills the command's whole session, then makes sure the stream ends. Idempotent; the first reason is kept. */
  terminate(reason: Exclude<TerminationReason, null>): Promise<void>;
  /** Drops the connection (the process in the container is not affected). */
  abandon(): void;
  readonly reason: () => TerminationReason;
}

/** Creates and starts the exec; resolves once its stream is open. Rejects with an AgentFense error. */
export async function launchExec(options: LaunchOptions): Promise<LaunchedExec> {
  const { api, logger } = options;
  const context = { action: 'running a command', cli: api };
  let execId: string;
  let socket: Duplex;
  try {
    ({ Id: execId } = await api.request<{ Id: string }>('POST', `/containers/${options.containerId}/exec`, {
      body: options.body,
    }));
    socket = await api.upgrade(`/exec/${execId}/start`, { Detach: false, Tty: false });
  } catch (err) {
    throw apiError(err, context);
  }
  const stdout = new PassThrough();
  const stderr = new SessionHeaderParser();
  const exited = demultiplex(socket, stdout, stderr);

  let stdin: Writable | null = null;
  if (options.mode === 'spawn') {
    stdin = new Writable({
      write: (chunk: Buffer, _enc, done) => {
        if (socket.writable) socket.write(chunk, () => done());
        else done();
      },
      final: (done) => {
        if (socket.writable) socket.end();
        done();
      },
    });
    stdin.on('error', () => undefined); // a write after the command exited: the pipe is just gone
  } else if (options.stdin !== undefined) {
    socket.write(options.stdin);
    socket.end();
  } else if (options.body.AttachStdin === true) {
    socket.end();
  }

  const session = Promise.race([stderr.session, exited.then(() => stderr.session)]);
  const exitCode = exited.then(() => inspectExitCode(api, execId, logger));

  let reason: TerminationReason = null;
  let terminating: Promise<void> | undefined;
  const abandon = (): void => {
    socket.destroy();
  };
  const terminate = (why: Exclude<TerminationReason, null>): Promise<void> => {
    reason ??= why;
    terminating ??= (async () => {
      const id = await Promise.race([session, delay(SESSION_WAIT_MS).then(() => null)]);
      if (id !== null) await options.killSession(id);
      const gone = await Promise.race([
        exited.then(() => true),
        delay(STREAM_END_GRACE_MS).then(() => false),
      ]);
      if (!gone) {
        logger.debug({ session: id }, 'an exec stream outlived its killed command: dropping it');
        abandon();
        await exited;
      }
    })();
    return terminating;
  };
  armTermination({
    timeoutMs: options.timeoutMs,
    signal: options.signal,
    terminate,
    onError: (err) => logger.warn({ err }, 'could not terminate a command'),
    ended: exited,
  });

  const launched: LaunchedExec = {
    stdin,
    stdout,
    stderr,
    session,
    exited,
    exitCode,
    terminate,
    abandon,
    reason: () => reason,
  };
  options.onSpawned?.(launched);
  return launched;
}

/** The exec's exit code (retried while the engine still reports it running); null if it cannot say. */
async function inspectExitCode(
  api: EngineApi,
  execId: string,
  logger: RuntimeLogger,
): Promise<number | null> {
  const deadline = performance.now() + INSPECT_RETRY_MS;
  for (let wait = 1; ; wait = Math.min(wait * 2, 50)) {
    try {
      const info = await api.request<ExecInspectInfo>('GET', `/exec/${execId}/json`);
      if (!info.Running) return info.ExitCode ?? null;
    } catch (err) {
      // The container was removed under the exec (stop()): no status to report.
      logger.debug({ err }, 'exec inspect failed');
      return null;
    }
    if (performance.now() > deadline) return null;
    await delay(wait);
  }
}

/** A timer promise that does not keep the process alive. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
