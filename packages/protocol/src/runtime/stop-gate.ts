// The stop-once state every RuntimeInstance keeps (runtime.ts): stop() tears the sandbox down exactly once,
// commands are refused after it, and a command that fails because stop() killed it mid-start reports the
// stop rather than the kill (a caller racing a destroy sees "stopped", not an internal error).
import { WrongStateError } from '../errors.js';

export class StopGate {
  readonly #sandboxId: string;
  #stopped: Promise<void> | undefined;

  constructor(sandboxId: string) {
    this.#sandboxId = sandboxId;
  }

  /** True once stop() was called (the teardown may still be running). */
  get stopped(): boolean {
    return this.#stopped !== undefined;
  }

  /** Runs `teardown` the first time; every call returns the same promise. */
  stop(teardown: () => Promise<void>): Promise<void> {
    this.#stopped ??= teardown();
    return this.#stopped;
  }

  /** Throws WrongStateError once stopped. */
  assertRunning(): void {
    if (this.#stopped !== undefined) throw new WrongStateError(`sandbox ${this.#sandboxId} is stopped`);
  }

  /** `started`, whose failure after a stop() is reported as the stop (the cause kept). */
  async unlessStopped<T>(started: Promise<T>): Promise<T> {
    try {
      return await started;
    } catch (err) {
      if (this.#stopped !== undefined) {
        throw new WrongStateError(`sandbox ${this.#sandboxId} was stopped while the command was starting`, {
          cause: err,
        });
      }
      throw err;
    }
  }
}
