// The host side of one session shell: writes protocol text to its stdin, collects stdout and stderr into
// trailer-aware collectors, and reports the moment anything changes so the session can re-check its state.
import { finished } from 'node:stream/promises';
import type { SandboxProcess } from '@agentfense/protocol';
import type { SessionLogger } from './options.js';
import { StreamCollector } from './trailer.js';
import type { TakenOutput, TrailerEvent } from './trailer.js';

/** How the shell ended, as the runtime reports it. */
export interface ShellExit {
  readonly exitCode: number | null;
  readonly signal: string | null;
}

/**
 * After the process is reported gone, how long its streams get to deliver their last bytes. bwrap ends
 * only after its pid namespace (every holder of the pipes) is gone, so they end at once in practice; the
 * bound only keeps a misbehaving runtime from hanging a close.
 */
const STREAM_DRAIN_MS = 2_000;

/** What ended a wait: a trailer on both streams, the shell's exit, or the deadline. */
export type WaitOutcome =
  | {
      readonly kind: 'trailer';
      readonly nonce: string;
      readonly stdout: TrailerEvent;
      readonly stderr: TrailerEvent;
    }
  | { readonly kind: 'exit'; readonly exit: ShellExit }
  | { readonly kind: 'deadline' };

export class ShellChannel {
  readonly stdout: StreamCollector;
  readonly stderr: StreamCollector;
  readonly #proc: SandboxProcess;
  readonly #logger: SessionLogger;
  #exit: ShellExit | undefined;
  readonly #waiters = new Set<() => void>();
  /** Resolves when the shell is gone and its output fully collected. Never rejects. */
  readonly exited: Promise<ShellExit>;

  constructor(options: { proc: SandboxProcess; maxOutputBytes: number; logger: SessionLogger }) {
    this.#proc = options.proc;
    this.#logger = options.logger;
    this.stdout = new StreamCollector({ maxBytes: options.maxOutputBytes });
    this.stderr = new StreamCollector({ maxBytes: options.maxOutputBytes });
    options.proc.stdout.on('data', (chunk: Buffer) => this.#onData(this.stdout, chunk));
    options.proc.stderr.on('data', (chunk: Buffer) => this.#onData(this.stderr, chunk));
    // Writing to a shell that just exited fails with EPIPE; the exit itself is what the session reports.
    options.proc.stdin.on('error', (err: unknown) => this.#logger.debug({ err }, 'session stdin closed'));
    this.exited = this.#watchExit();
  }

  /** The shell's exit, once it is gone and its output collected. */
  get exit(): ShellExit | undefined {
    return this.#exit;
  }

  /** Looks for the trailer of `nonce` on both streams; call before writing the text that prints it. */
  watch(nonce: string): void {
    this.stdout.watch(nonce);
    this.stderr.watch(nonce);
  }

  /** Output before a trailer on both streams; stops watching every nonce. */
  takeUpTo(outcome: { stdout: TrailerEvent; stderr: TrailerEvent }): {
    stdout: TakenOutput;
    stderr: TakenOutput;
  } {
    const taken = {
      stdout: this.stdout.take(outcome.stdout.offset),
      stderr: this.stderr.take(outcome.stderr.offset),
    };
    this.stdout.unwatchAll();
    this.stderr.unwatchAll();
    return taken;
  }

  /**
   * Resolves when one of `nonces` (checked in order) has printed its trailer on both streams, when the
   * shell is gone, or at `deadline` (a performance.now() time; none: wait forever).
   */
  async waitForTrailer(nonces: readonly string[], deadline?: number): Promise<WaitOutcome> {
    for (;;) {
      for (const nonce of nonces) {
        const stdout = this.stdout.event(nonce);
        const stderr = this.stderr.event(nonce);
        if (stdout !== undefined && stderr !== undefined) return { kind: 'trailer', nonce, stdout, stderr };
      }
      if (this.#exit !== undefined) return { kind: 'exit', exit: this.#exit };
      const left = deadline === undefined ? undefined : deadline - performance.now();
      if (left !== undefined && left <= 0) return { kind: 'deadline' };
      await this.changed(left);
    }
  }

  write(bytes: Buffer): void {
    if (this.#exit === undefined) this.#proc.stdin.write(bytes);
  }

  /** Resolves at the next chunk of output or the exit, or after `timeoutMs` (when given). */
  changed(timeoutMs?: number): Promise<void> {
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const wake = (): void => {
        if (timer !== undefined) clearTimeout(timer);
        this.#waiters.delete(wake);
        resolve();
      };
      this.#waiters.add(wake);
      if (timeoutMs !== undefined) timer = setTimeout(wake, Math.max(0, timeoutMs));
    });
  }

  /** Kills the shell and everything it started; resolves once its output is collected. */
  async kill(): Promise<ShellExit> {
    await this.#proc.kill();
    return this.exited;
  }

  #onData(collector: StreamCollector, chunk: Buffer): void {
    collector.push(chunk);
    this.#wakeAll();
  }

  #wakeAll(): void {
    for (const wake of [...this.#waiters]) wake();
  }

  async #watchExit(): Promise<ShellExit> {
    const exit = await this.#proc.wait();
    const drained = Promise.all([
      finished(this.#proc.stdout).catch(() => undefined),
      finished(this.#proc.stderr).catch(() => undefined),
    ]);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([drained, new Promise((resolve) => (timer = setTimeout(resolve, STREAM_DRAIN_MS)))]);
    clearTimeout(timer);
    this.#exit = exit;
    this.#wakeAll();
    return exit;
  }
}
