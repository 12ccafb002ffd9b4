// The timeout and abort triggers of a running command, shared by both runtimes: each runtime says how a
// command is ended (terminate); this arms the timer and the AbortSignal listener and removes both when the
// command has ended, so nothing keeps a finished command's sandbox (or the process) alive.

/** Why a runtime ends a command from outside on the caller's behalf. */
export type TerminationTrigger = 'timeout' | 'abort';

export interface TerminationOptions {
  /** Ends the command after this many ms (absent: never). */
  readonly timeoutMs?: number | undefined;
  /** Ends the command when aborted (at once when already aborted). */
  readonly signal?: AbortSignal | undefined;
  /** Ends the command; it may be called more than once (a timeout, then an abort) and must be idempotent. */
  readonly terminate: (why: TerminationTrigger) => Promise<void>;
  /** Told when terminate fails (the runtime logs it; the command's own result still settles). */
  readonly onError: (err: unknown) => void;
  /** Settles when the command has ended: the timer and the listener are removed then. */
  readonly ended: Promise<unknown>;
}

/** Arms the timeout and the abort signal of one command. */
export function armTermination(options: TerminationOptions): void {
  const { signal, terminate, onError } = options;
  const timer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => void terminate('timeout').catch(onError), options.timeoutMs);
  const onAbort = (): void => void terminate('abort').catch(onError);
  if (signal?.aborted === true) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  const disarm = (): void => {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  };
  options.ended.then(disarm, disarm);
}
