// A persistent shell inside a sandbox: one command at a time, exact framing, interruptible timeouts,
// idle timeout. Built only on RuntimeInstance.spawn(), so it works the same on bwrap and Docker.
// Create one with createSession() (create.ts); the protocol is described in README.md.
import { WrongStateError } from '@agentfense/protocol';
import type { ShellChannel } from './channel.js';
import { newNonce } from './nonce.js';
import type {
  ResolvedCreateOptions,
  SessionCloseReason,
  SessionExecOptions,
  SessionExecResult,
  SessionRunResult,
  SessionLogger,
} from './options.js';
import { resolveExec } from './options.js';
import { decodeOutput, splitEncoding } from './output.js';
import type { BytesOutput, OutputEncoding, TextOutput } from './output.js';
import type { ResolvedExec } from './options.js';
import type { SessionShell } from './script.js';
import { RELAY_INTERRUPT, RELAY_KILL_OTHERS, commandScript, relayFrame, resyncScript } from './script.js';
import type { TakenOutput } from './trailer.js';

/**
 * How long a timed-out command gets to die of SIGINT before every other process of the session is
 * SIGKILLed, and then how long the shell gets to come back before it is killed too. SIGINT is what a
 * person's Ctrl-C sends: most programs die of it at once. One second each leaves room for a loaded machine
 * without making a stuck command cost much.
 */
export const INTERRUPT_GRACE_MS = 1_000;
export const KILL_GRACE_MS = 2_000;

/** Plain-data description of a session (for listings and the HTTP API). */
export interface SessionInfo {
  readonly id: string;
  readonly sandboxId: string;
  readonly shell: SessionShell;
  readonly status: 'open' | 'closed';
  readonly closedReason: SessionCloseReason | null;
  readonly createdAt: Date;
  readonly lastActiveAt: Date;
}

/** What createSession() hands to the constructor (not public API). */
export interface SessionInit {
  readonly options: ResolvedCreateOptions;
  readonly sandboxId: string;
  readonly channel: ShellChannel;
}

/** A persistent shell in a sandbox. Commands queue and run one at a time; see createSession(). */
export class Session implements AsyncDisposable {
  readonly id: string;
  readonly sandboxId: string;
  readonly shell: SessionShell;
  readonly createdAt = new Date();
  readonly #channel: ShellChannel;
  readonly #options: ResolvedCreateOptions;
  readonly #logger: SessionLogger;
  #lastActiveAt = new Date();
  #status: 'open' | 'closed' = 'open';
  #closedReason: SessionCloseReason | null = null;
  #closing: Promise<void> | undefined;
  /** `$?` of the last command, restored for the next one. */
  #previousStatus = 0;
  /** Tail of the command queue: each exec runs after the previous one settles. */
  #queue: Promise<unknown> = Promise.resolve();
  /** Execs queued or running; the idle timer runs only at zero. */
  #pending = 0;
  #idleTimer: NodeJS.Timeout | undefined;
  /** The workspace was remounted (worker restart): the next command first re-enters the cwd. */
  #remounted = false;

  constructor(init: SessionInit) {
    this.id = init.options.id;
    this.sandboxId = init.sandboxId;
    this.shell = init.options.shell;
    this.#options = init.options;
    this.#logger = init.options.logger;
    this.#channel = init.channel;
    // The shell can end on its own between commands (a background `kill $$`, the sandbox stopped).
    void this.#channel.exited.then(() => this.#markClosed('exited'));
    this.#armIdleTimer();
  }

  get status(): 'open' | 'closed' {
    return this.#status;
  }

  /** Why the session closed; null while open. */
  get closedReason(): SessionCloseReason | null {
    return this.#closedReason;
  }

  get lastActiveAt(): Date {
    return this.#lastActiveAt;
  }

  info(): SessionInfo {
    return {
      id: this.id,
      sandboxId: this.sandboxId,
      shell: this.shell,
      status: this.#status,
      closedReason: this.#closedReason,
      createdAt: this.createdAt,
      lastActiveAt: this.#lastActiveAt,
    };
  }

  /**
   * Runs `command` in the shell, after every command queued before it. Resolves with its output (UTF-8
   * strings, or Buffers with `{ encoding: 'buffer' }`) and `$?` (a timeout resolves with `timedOut`;
   * `exit` resolves with the shell's status and `sessionClosed`). Rejects with WrongStateError when the
   * session is closed before or while the command runs (other than by the command itself),
   * InvalidArgumentError for bad input.
   */
  run(command: string, options?: SessionExecOptions & TextOutput): Promise<SessionRunResult>;
  run(command: string, options: SessionExecOptions & BytesOutput): Promise<SessionExecResult>;
  async run(
    command: string,
    options: SessionExecOptions & { readonly encoding?: OutputEncoding } = {},
  ): Promise<SessionRunResult | SessionExecResult> {
    const { encoding, rest } = splitEncoding(options);
    const result = await this.#exec(command, rest);
    return encoding === 'buffer' ? result : decodeOutput(result);
  }

  /** @deprecated Use `run(command, { ...options, encoding: 'buffer' })` (same result: output as Buffers). */
  exec(command: string, options: SessionExecOptions = {}): Promise<SessionExecResult> {
    return this.run(command, { ...options, encoding: 'buffer' });
  }

  async #exec(command: string, options: SessionExecOptions): Promise<SessionExecResult> {
    const resolved = resolveExec(command, options);
    this.#assertOpen();
    this.#pending += 1;
    this.#clearIdleTimer();
    const run = this.#queue.then(() => this.#runQueued(resolved));
    this.#queue = run.catch(() => undefined);
    try {
      const done = await run;
      return this.#options.redact?.(done) ?? done;
    } finally {
      this.#pending -= 1;
      this.#lastActiveAt = new Date();
      this.#armIdleTimer();
    }
  }

  /**
   * The sandbox's worker was replaced and its new mount is in place (a runtime whose sessions survive
   * that): the next command first re-enters the shell's working directory, which was in the dead mount.
   */
  workspaceRemounted(): void {
    this.#remounted = true;
  }

  /** Kills the shell and everything it started; queued and running commands reject. Idempotent. */
  close(options: { reason?: SessionCloseReason } = {}): Promise<void> {
    this.#closing ??= (async () => {
      this.#markClosed(options.reason ?? 'closed');
      await this.#channel.kill();
    })();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #runQueued(exec: ResolvedExec): Promise<SessionExecResult> {
    this.#assertOpen();
    const started = performance.now();
    const nonce = newNonce();
    this.#channel.watch(nonce);
    const reenterCwd = this.#remounted;
    this.#remounted = false;
    this.#channel.write(
      relayFrame(
        commandScript({
          command: exec.command,
          nonce,
          previousStatus: this.#previousStatus,
          reenterCwd,
          ...(exec.stdin === undefined ? {} : { stdin: exec.stdin }),
        }),
      ),
    );
    const deadline = exec.timeoutMs === undefined ? undefined : started + exec.timeoutMs;
    const outcome = await this.#channel.waitForTrailer([nonce], deadline);
    switch (outcome.kind) {
      case 'trailer': {
        this.#previousStatus = outcome.stdout.status;
        const taken = this.#channel.takeUpTo(outcome);
        return result({ ...taken, exitCode: outcome.stdout.status, started, timedOut: false });
      }
      case 'exit':
        return this.#exitResult(started, false);
      case 'deadline':
        return this.#interrupt(started);
    }
  }

  /**
   * The command outlived its timeout. SIGINT (the shell abandons the command and reads on), then SIGKILL
   * to every other process of the session, then the shell itself. A resync trailer tells when the shell
   * reads input again; if two were sent, a barrier trailer flushes the late one. The command's own trailer
   * may still arrive (it finished as the timer fired): it stays watched, so it is dropped from the output.
   */
  async #interrupt(started: number): Promise<SessionExecResult> {
    const first = newNonce();
    const resyncs = [first];
    this.#channel.watch(first);
    this.#channel.write(Buffer.concat([RELAY_INTERRUPT, relayFrame(resyncScript(first))]));
    let outcome = await this.#channel.waitForTrailer(resyncs, performance.now() + INTERRUPT_GRACE_MS);
    if (outcome.kind === 'deadline') {
      this.#logger.debug({ sessionId: this.id }, 'command ignored SIGINT: killing its processes');
      const second = newNonce();
      resyncs.push(second);
      this.#channel.watch(second);
      this.#channel.write(Buffer.concat([RELAY_KILL_OTHERS, relayFrame(resyncScript(second))]));
      outcome = await this.#channel.waitForTrailer(resyncs, performance.now() + KILL_GRACE_MS);
    }
    if (outcome.kind === 'exit') return this.#exitResult(started, true);
    if (outcome.kind === 'deadline') return this.#killAfterTimeout(started);
    // Output before the resync trailer; a late trailer of the command itself was cut out (still watched).
    const { stdout, stderr } = this.#channel.takeUpTo(outcome);
    this.#previousStatus = outcome.stdout.status;
    if (resyncs.length > 1) {
      const barrier = newNonce();
      for (const nonce of resyncs) this.#channel.watch(nonce);
      this.#channel.watch(barrier);
      this.#channel.write(relayFrame(resyncScript(barrier)));
      const flushed = await this.#channel.waitForTrailer([barrier], performance.now() + KILL_GRACE_MS);
      if (flushed.kind === 'trailer') this.#channel.takeUpTo(flushed);
      else if (flushed.kind === 'deadline') await this.close({ reason: 'timeout' });
    }
    return result({
      stdout,
      stderr,
      exitCode: null,
      started,
      timedOut: true,
      sessionClosed: this.#status === 'closed',
    });
  }

  /** The shell would not come back from an interrupt: kill it, report what the command printed. */
  async #killAfterTimeout(started: number): Promise<SessionExecResult> {
    this.#logger.debug({ sessionId: this.id }, 'shell did not return after a timeout: closing the session');
    await this.close({ reason: 'timeout' });
    return result({
      stdout: this.#channel.stdout.flush(),
      stderr: this.#channel.stderr.flush(),
      exitCode: null,
      started,
      timedOut: true,
      sessionClosed: true,
    });
  }

  /**
   * The shell is gone while a command ran. If the command ended it (`exit`, `exec`, `set -e`, a signal it
   * sent itself), that is this command's result; if the session was closed from outside, the caller learns
   * it with WrongStateError.
   */
  async #exitResult(started: number, timedOut: boolean): Promise<SessionExecResult> {
    const exit = await this.#channel.exited;
    if (this.#closedReason !== null && this.#closedReason !== 'exited') {
      throw new WrongStateError(
        `session ${this.id} was closed (${this.#closedReason}) while a command was running`,
      );
    }
    this.#markClosed('exited');
    return result({
      stdout: this.#channel.stdout.flush(),
      stderr: this.#channel.stderr.flush(),
      exitCode: timedOut ? null : exit.exitCode,
      started,
      timedOut,
      sessionClosed: true,
    });
  }

  #assertOpen(): void {
    if (this.#status === 'closed') {
      throw new WrongStateError(`session ${this.id} is closed (${this.#closedReason ?? 'closed'})`);
    }
  }

  /** Records the close once (the first reason wins) and tells the registry. */
  #markClosed(reason: SessionCloseReason): void {
    if (this.#status === 'closed') return;
    this.#status = 'closed';
    this.#closedReason = reason;
    this.#clearIdleTimer();
    try {
      this.#options.onClose?.(this);
    } catch (err) {
      this.#logger.debug({ err, sessionId: this.id }, 'onClose callback threw');
    }
  }

  #armIdleTimer(): void {
    if (this.#status === 'closed' || this.#pending > 0) return;
    this.#clearIdleTimer();
    this.#idleTimer = setTimeout(() => {
      this.close({ reason: 'idle-timeout' }).catch((err: unknown) =>
        this.#logger.debug({ err, sessionId: this.id }, 'idle close failed'),
      );
    }, this.#options.idleTimeoutMs);
    // An idle session must not keep the control plane's event loop alive by itself.
    this.#idleTimer.unref();
  }

  #clearIdleTimer(): void {
    if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
  }
}

function result(parts: {
  stdout: TakenOutput;
  stderr: TakenOutput;
  exitCode: number | null;
  started: number;
  timedOut: boolean;
  sessionClosed?: boolean;
}): SessionExecResult {
  return {
    stdout: parts.stdout.data,
    stderr: parts.stderr.data,
    exitCode: parts.exitCode,
    durationMs: performance.now() - parts.started,
    timedOut: parts.timedOut,
    truncated: parts.stdout.truncated || parts.stderr.truncated,
    sessionClosed: parts.sessionClosed ?? false,
  };
}
