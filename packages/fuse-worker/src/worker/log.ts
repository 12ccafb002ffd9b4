// The worker's log: pino-compatible JSON lines (level numbers, `time` in ms, `msg`, errors as
// {type, message, stack, ...}) appended to a file, without pino. Importing pino cost the worker ~135 ms of
// CPU at every start on a loaded 2-core host (half of node's own start-up), and the worker logs a few lines
// per mount (start, mount, unmount, failures), so plain synchronous appends are enough, and `flush` is free.
import { closeSync, openSync, writeSync } from 'node:fs';

export const LOG_LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;
export type LogLevel = keyof typeof LOG_LEVELS;

interface LogFn {
  (obj: object, msg?: string): void;
  (msg: string): void;
}

/** The subset of pino's Logger the worker uses. */
export interface WorkerLogger {
  readonly trace: LogFn;
  readonly debug: LogFn;
  readonly info: LogFn;
  readonly warn: LogFn;
  readonly error: LogFn;
  readonly fatal: LogFn;
  child(bindings: Record<string, unknown>): WorkerLogger;
  flush(): void;
}

/** A log file that can be switched to another path (a pooled worker learns its sandbox's at mount). */
export class LogFile {
  #fd: number;
  constructor(path: string) {
    this.#fd = open(path);
  }
  write(line: string): void {
    try {
      writeSync(this.#fd, line);
    } catch {
      // A full disk must not take the mount down with it.
    }
  }
  reopen(path: string): void {
    let fd: number;
    try {
      fd = open(path);
    } catch {
      return; // its directory is gone (the data directory was removed): keep writing where it was
    }
    const old = this.#fd;
    this.#fd = fd;
    closeSync(old);
  }
}

/**
 * Opens a log for appending. Its directory is never made here: the control plane makes its data
 * directory's, and a worker must not make a data directory someone removed again.
 */
function open(path: string): number {
  return openSync(path, 'a', 0o600);
}

/** Creates a logger writing to `file` at `level` and above, with `base` fields on every line. */
export function createWorkerLogger(
  file: LogFile,
  level: string,
  base: Record<string, unknown>,
): WorkerLogger {
  const threshold = (LOG_LEVELS as Record<string, number>)[level] ?? LOG_LEVELS.info;
  const make = (bindings: Record<string, unknown>): WorkerLogger => {
    const at =
      (value: number): LogFn =>
      (first: object | string, msg?: string): void => {
        if (value < threshold) return;
        const fields = typeof first === 'string' ? {} : serialize(first);
        const text = typeof first === 'string' ? first : msg;
        const record = { level: value, time: Date.now(), ...bindings, ...fields, msg: text };
        file.write(`${safeStringify(record)}\n`);
      };
    return {
      trace: at(LOG_LEVELS.trace),
      debug: at(LOG_LEVELS.debug),
      info: at(LOG_LEVELS.info),
      warn: at(LOG_LEVELS.warn),
      error: at(LOG_LEVELS.error),
      fatal: at(LOG_LEVELS.fatal),
      child: (more) => make({ ...bindings, ...more }),
      flush: () => undefined,
    };
  };
  return make(base);
}

/** Errors (under any key, `err` by convention) become plain objects, as pino's serializer does. */
function serialize(obj: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(obj))
    out[key] = value instanceof Error ? errorObject(value) : value;
  return out;
}

function errorObject(err: Error): Record<string, unknown> {
  const out: Record<string, unknown> = { type: err.constructor.name, message: err.message, stack: err.stack };
  for (const [key, value] of Object.entries(err)) if (!(key in out)) out[key] = value;
  if (err.cause instanceof Error) out['cause'] = errorObject(err.cause);
  return out;
}

function safeStringify(record: object): string {
  try {
    return JSON.stringify(record, (_key, value: unknown) =>
      typeof value === 'bigint' ? value.toString() : value,
    );
  } catch {
    return JSON.stringify({ ...record, unserializable: true }, ['level', 'time', 'msg', 'unserializable']);
  }
}
