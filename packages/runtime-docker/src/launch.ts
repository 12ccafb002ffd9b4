// Starts one `docker exec` (the CLI, with execa, from an argv array) and owns the one way to end it.
//
// Ending a command is not killing the CLI: a killed `docker exec` client leaves its process running in the
// container. So terminate() waits for the wrapper's session header (the command's session id inside the
// container), kills that session (the runtime decides how: from the host through the container's cgroup,
// or with an in-container kill script), and only then waits for the CLI, which exits once the wrapper has
// reported the command's status. A CLI still alive after a grace period (something that left the session
// holds its pipes) is SIGKILLed: the command is dead by then, only the client is left.
import type { Readable } from 'node:stream';
import { execa } from 'execa';
import type { ResultPromise } from 'execa';
import type { DockerCli } from './engine.js';
import { SessionHeaderParser } from './header.js';
import type { RuntimeLogger } from './logger.js';

/** How long the CLI gets to exit after its command's session was killed before it is SIGKILLed. */
const CLI_EXIT_GRACE_MS = 2_000;
/** How long terminate() waits for the session header (docker exec normally starts in ~50-100 ms). */
const SESSION_WAIT_MS = 20_000;

export interface LaunchOptions {
  readonly cli: DockerCli;
  /** `docker exec …` arguments (buildExecArgs). */
  readonly args: readonly string[];
  /** 'exec': stdin from bytes or nothing. 'spawn': raw stdin pipe. Output is never buffered here. */
  readonly mode: 'exec' | 'spawn';
  readonly stdin?: Uint8Array;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** Kills every process of a command's session (container-side id). */
  readonly killSession: (sessionId: number) => Promise<void>;
  readonly logger: RuntimeLogger;
  /** Called synchronously once the CLI process exists, e.g. to track it for stop(). */
  readonly onSpawned?: (launched: LaunchedExec) => void;
}

/** The running CLI. */
export type DockerSubprocess = ResultPromise<{
  reject: false;
  encoding: 'buffer';
  buffer: false;
  stripFinalNewline: false;
}>;

/** Why we ended a command ourselves (null: it ended on its own or was killed from inside). */
export type TerminationReason = 'timeout' | 'abort' | 'kill' | 'output-limit' | null;

/** A launched `docker exec` and the one way to end it. */
export interface LaunchedExec {
  readonly subprocess: DockerSubprocess;
  readonly stdout: Readable;
  /** The command's stderr, without the session header. */
  readonly stderr: SessionHeaderParser;
  /** The command's session id inside the container; null if the wrapper never ran. */
  readonly session: Promise<number | null>;
  /** Resolves when the CLI has exited (never rejects). */
  readonly exited: Promise<void>;
  /** Kills the command's whole session, then makes sure the CLI exits. Idempotent; the first reason is kept. */
  terminate(reason: Exclude<TerminationReason, null>): Promise<void>;
  readonly reason: () => TerminationReason;
}

/** Starts `docker exec`; returns at once (the caller awaits `session` or the subprocess). */
export function launchExec(options: LaunchOptions): LaunchedExec {
  const { mode, logger } = options;
  const subprocess = execa(options.cli.path, options.args, {
    stdin: mode === 'spawn' || options.stdin !== undefined ? 'pipe' : 'ignore',
    ...(mode === 'exec' && options.stdin !== undefined ? { input: options.stdin } : {}),
    stdout: 'pipe',
    stderr: 'pipe',
    reject: false,
    encoding: 'buffer',
    buffer: false,
    stripFinalNewline: false,
    // The CLI gets only the docker settings; the container's environment is built from --env arguments.
    env: options.cli.env,
    extendEnv: false,
    // If the control plane exits, the CLI goes too (the container and its processes stay until stop()).
    cleanup: true,
  }) as unknown as DockerSubprocess;
  const stdout = subprocess.stdout;
  const rawStderr = subprocess.stderr;
  const stderr = new SessionHeaderParser();
  rawStderr.pipe(stderr);
  const exited = subprocess.then(
    () => undefined,
    () => undefined,
  );
  // If the CLI dies before its stderr ends (it cannot, but never hang on it), there is no header.
  const session = Promise.race([stderr.session, exited.then(() => stderr.session)]);

  let reason: TerminationReason = null;
  let terminating: Promise<void> | undefined;
  const terminate = (why: Exclude<TerminationReason, null>): Promise<void> => {
    reason ??= why;
    terminating ??= (async () => {
      const id = await Promise.race([session, delay(SESSION_WAIT_MS).then(() => null)]);
      if (id !== null) await options.killSession(id);
      const gone = await Promise.race([exited.then(() => true), delay(CLI_EXIT_GRACE_MS).then(() => false)]);
      if (!gone) {
        logger.debug({ session: id }, 'docker exec outlived its killed command: killing the client');
        subprocess.kill('SIGKILL');
        await exited;
      }
    })();
    return terminating;
  };
  const onTerminateError = (err: unknown): void => logger.warn({ err }, 'could not terminate a command');
  const timer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => void terminate('timeout').catch(onTerminateError), options.timeoutMs);
  const onAbort = (): void => void terminate('abort').catch(onTerminateError);
  if (options.signal?.aborted === true) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  void exited.finally(() => {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  });

  const launched: LaunchedExec = {
    subprocess,
    stdout,
    stderr,
    session,
    exited,
    terminate,
    reason: () => reason,
  };
  options.onSpawned?.(launched);
  return launched;
}

/** A timer promise that does not keep the process alive. */
function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
