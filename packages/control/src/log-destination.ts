// The control plane's log file as a pino destination that never throws. pino's own file destination
// emits 'error' when a write fails, which nothing can listen to in time: on a full filesystem the next
// log line threw out of whatever was logging (an HTTP error handler, a destroy), so the request hung
// or failed for the sake of a log line. Here a line that cannot be written is dropped and counted, the
// first drop is said once on stderr (which is not on the full filesystem), and the count is logged as
// soon as a line fits again.
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

/** What a log file needs besides its path. */
export interface LogFileOptions {
  readonly path: string;
  /** Where the first failure of a run of failures is said (default: process.stderr). */
  readonly onFirstFailure?: (message: string) => void;
}

/** An append-only JSON-lines file with synchronous writes (lines survive a crash of the writer). */
export class SafeLogFile {
  readonly #path: string;
  readonly #onFirstFailure: (message: string) => void;
  #fd: number;
  /** Lines dropped since the last line that was written. */
  #dropped = 0;
  /** The last write stopped inside a line: the next one starts on a new line. */
  #torn = false;

  constructor(options: LogFileOptions) {
    this.#path = options.path;
    this.#onFirstFailure =
      options.onFirstFailure ?? ((message: string) => void process.stderr.write(`${message}\n`));
    mkdirSync(dirname(options.path), { recursive: true, mode: 0o700 });
    this.#fd = openSync(options.path, 'a', 0o600);
  }

  /** pino's destination interface: one serialized line (with its newline). Never throws. */
  write(line: string): boolean {
    if (this.#dropped > 0 && !this.#append(droppedNote(this.#dropped))) {
      this.#dropped++;
      return true;
    }
    this.#dropped = 0;
    if (!this.#append(line)) this.#dropped++;
    return true;
  }

  /** Lines dropped since the last one written (0 while writes work). */
  get dropped(): number {
    return this.#dropped;
  }

  /** Closes the file; later lines are dropped. */
  close(): void {
    try {
      closeSync(this.#fd);
    } catch {
      // Already closed: nothing holds the file any more, which is what closing is for.
    }
    this.#fd = -1;
  }

  /** Appends the whole line, or reports false; a torn line is ended before the next one. */
  #append(line: string): boolean {
    const data = Buffer.from(this.#torn ? `\n${line}` : line);
    let offset = 0;
    try {
      while (offset < data.length) offset += writeSync(this.#fd, data, offset, data.length - offset);
      this.#torn = false;
      return true;
    } catch (err) {
      if (offset > 0) this.#torn = true;
      if (this.#dropped === 0) {
        const reason = err instanceof Error ? err.message : String(err);
        this.#onFirstFailure(
          `agentfense: cannot write the log ${this.#path} (${reason}); log lines are dropped until it can`,
        );
      }
      return false;
    }
  }
}

/** The line that says how many lines are missing before it (pino's shape: level 40 is warn). */
function droppedNote(count: number): string {
  const record = {
    level: 40,
    time: Date.now(),
    pid: process.pid,
    component: 'control',
    dropped: count,
    msg: `${count} log line(s) were dropped here: the log could not be written (a full filesystem?)`,
  };
  return `${JSON.stringify(record)}\n`;
}
