// Session options and results: the public types, their defaults, and validation of what callers pass.
import { InvalidArgumentError } from '@agentfense/protocol';
import { assertSessionId, newSessionId } from './ids.js';
import { SESSION_SHELLS } from './script.js';
import type { SessionShell } from './script.js';
import type { Session } from './session.js';

/** Why a session is closed. */
export type SessionCloseReason =
  /** close() (or `await using`) */
  | 'closed'
  /** no command for `idleTimeoutMs` */
  | 'idle-timeout'
  /** the shell exited: `exit`, `exec`, a fatal `set -e`, or it was killed */
  | 'exited'
  /** a timed-out command could not be interrupted, so the shell was killed */
  | 'timeout'
  /** its sandbox stopped or was destroyed (SessionManager.closeSandbox) */
  | 'sandbox-stopped'
  /** the sandbox's worker was restarted and this shell's /workspace cannot follow (bwrap); open a new one */
  | 'worker-restarted';

/** What a session logs (pino's `debug` fits). */
export interface SessionLogger {
  debug(obj: object, msg: string): void;
}

export interface CreateSessionOptions {
  /** `ses_<uuid>`; generated when absent. */
  readonly id?: string;
  /** Default `/bin/sh`. */
  readonly shell?: SessionShell;
  /** Initial environment of the shell, on top of the sandbox's. */
  readonly env?: Readonly<Record<string, string>>;
  /** Initial working directory; default the runtime's (`/workspace`). */
  readonly cwd?: string;
  /** Close after this long without a command; default 30 minutes. */
  readonly idleTimeoutMs?: number;
  /** Per-stream output kept per command; beyond it output is dropped and `truncated` set. Default 16 MiB. */
  readonly maxOutputBytes?: number;
  /** Called once, synchronously, when the session closes (for registries). */
  readonly onClose?: (session: Session) => void;
  readonly logger?: SessionLogger;
  /** Masks what a command's result must not show (a sandbox's secret values, docs/secrets.md). */
  readonly redact?: (result: SessionExecResult) => SessionExecResult;
}

export interface SessionExecOptions {
  /** Interrupt the command after this many milliseconds; the session stays usable. */
  readonly timeoutMs?: number;
  /** The command's stdin (then end of file); absent: empty. At most MAX_STDIN_BYTES. */
  readonly stdin?: string | Uint8Array;
}

/** The outcome of one session command. */
export interface SessionExecResult {
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  /** `$?` after the command; the shell's exit status if the command ended the shell; null when timed out. */
  readonly exitCode: number | null;
  readonly durationMs: number;
  readonly timedOut: boolean;
  /** Output beyond `maxOutputBytes` was dropped. */
  readonly truncated: boolean;
  /** The session closed while this command ran (it ran `exit`, or could not be interrupted). */
  readonly sessionClosed: boolean;
}

/** A session command's result with stdout and stderr as UTF-8 strings (the default of `Session.run`). */
export interface SessionRunResult extends Omit<SessionExecResult, 'stdout' | 'stderr'> {
  readonly stdout: string;
  readonly stderr: string;
}

export const DEFAULT_SHELL: SessionShell = '/bin/sh';
export const DEFAULT_IDLE_TIMEOUT_MS = 30 * 60_000;
export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/**
 * Command text and stdin travel through the relay, which reads its input a byte per syscall (the shell's
 * `read` builtin cannot over-read a pipe): ~1 s per MiB. Larger data belongs in a file in /workspace.
 */
export const MAX_COMMAND_BYTES = 1024 * 1024;
export const MAX_STDIN_BYTES = 1024 * 1024;
/** setTimeout's ceiling (~24.8 days); longer timeouts would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface ResolvedCreateOptions {
  readonly id: string;
  readonly shell: SessionShell;
  readonly env: Readonly<Record<string, string>> | undefined;
  readonly cwd: string | undefined;
  readonly idleTimeoutMs: number;
  readonly maxOutputBytes: number;
  readonly onClose: ((session: Session) => void) | undefined;
  readonly logger: SessionLogger;
  readonly redact: ((result: SessionExecResult) => SessionExecResult) | undefined;
}

const SILENT: SessionLogger = { debug: () => undefined };

/** Validates create options and fills in defaults. env and cwd are validated by the runtime. */
export function resolveCreateOptions(options: CreateSessionOptions): ResolvedCreateOptions {
  if (options.id !== undefined) assertSessionId(options.id);
  const shell = options.shell ?? DEFAULT_SHELL;
  if (!(SESSION_SHELLS as readonly string[]).includes(shell)) {
    throw new InvalidArgumentError(
      `invalid session shell ${JSON.stringify(shell)}: expected one of ${SESSION_SHELLS.join(', ')}`,
    );
  }
  return {
    id: options.id ?? newSessionId(),
    shell,
    env: options.env,
    cwd: options.cwd,
    idleTimeoutMs: checkDuration('idleTimeoutMs', options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS),
    maxOutputBytes: checkCount('maxOutputBytes', options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES),
    onClose: options.onClose,
    logger: options.logger ?? SILENT,
    redact: options.redact,
  };
}

export interface ResolvedExec {
  readonly command: Buffer;
  readonly stdin: Buffer | undefined;
  readonly timeoutMs: number | undefined;
}

/** Validates one exec call: the command has no NUL (no shell string can), sizes are bounded. */
export function resolveExec(command: unknown, options: SessionExecOptions): ResolvedExec {
  if (typeof command !== 'string') throw new InvalidArgumentError('a session command must be a string');
  if (command.includes('\0')) throw new InvalidArgumentError('a session command cannot contain a NUL byte');
  const bytes = Buffer.from(command, 'utf8');
  if (bytes.length > MAX_COMMAND_BYTES) {
    throw new InvalidArgumentError(`a session command is limited to ${MAX_COMMAND_BYTES} bytes`);
  }
  let stdin: Buffer | undefined;
  if (options.stdin !== undefined) {
    if (typeof options.stdin !== 'string' && !(options.stdin instanceof Uint8Array)) {
      throw new InvalidArgumentError('stdin must be a string or bytes');
    }
    stdin =
      typeof options.stdin === 'string' ? Buffer.from(options.stdin, 'utf8') : Buffer.from(options.stdin);
    if (stdin.length > MAX_STDIN_BYTES) {
      throw new InvalidArgumentError(`a session command's stdin is limited to ${MAX_STDIN_BYTES} bytes`);
    }
  }
  const timeoutMs =
    options.timeoutMs === undefined ? undefined : checkDuration('timeoutMs', options.timeoutMs);
  return { command: bytes, stdin, timeoutMs };
}

function checkDuration(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) {
    throw new InvalidArgumentError(`${name} must be a number of milliseconds in (0, ${MAX_TIMER_MS}]`);
  }
  return value;
}

function checkCount(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidArgumentError(`${name} must be a positive integer`);
  }
  return value;
}
