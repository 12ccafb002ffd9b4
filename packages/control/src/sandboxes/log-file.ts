// Reading a sandbox's log file (its worker's JSON lines) while the worker may still be appending to it:
// the tail of what is there, then each whole line as it is completed. Shared by `agentfense logs -f` and
// the HTTP logs stream, so both cut lines the same way.
import { open, stat } from 'node:fs/promises';

/** Longest piece of a log file read at once (a tail request, or one poll of a fast-growing log). */
export const MAX_LOG_READ_BYTES = 16 * 1024 * 1024;

/** Lines and the byte offset just after the last whole one. */
export interface LogChunk {
  readonly lines: string[];
  readonly offset: number;
}

async function sizeOf(file: string): Promise<number> {
  return stat(file).then(
    (s) => s.size,
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return -1;
      throw err;
    },
  );
}

/** `length` bytes of `file` from `from`; null when the file is gone (a sandbox destroyed meanwhile). */
async function readRange(file: string, from: number, length: number): Promise<Buffer | null> {
  const handle = await open(file, 'r').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (handle === null) return null;
  try {
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, from);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

const NEWLINE = 0x0a;

/** The lines of `bytes`, which end with a newline (or are a piece of an overlong line). */
function splitLines(bytes: Buffer): string[] {
  if (bytes.length === 0) return [];
  const lines = bytes.toString('utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/**
 * The last `count` whole lines of `file` (reading at most its last MAX_LOG_READ_BYTES) and the offset to
 * follow it from; no lines and offset 0 when the file does not exist yet. A line still being written is
 * left for the follower. Offsets are byte positions of newlines, never lengths of decoded text.
 */
export async function tailLog(file: string, count: number): Promise<LogChunk> {
  const size = await sizeOf(file);
  if (size <= 0) return { lines: [], offset: 0 };
  const length = Math.min(size, MAX_LOG_READ_BYTES);
  const bytes = await readRange(file, size - length, length);
  if (bytes === null) return { lines: [], offset: 0 };
  const end = bytes.lastIndexOf(NEWLINE) + 1;
  // A window that starts inside the file starts inside a line: drop that piece.
  const start = length < size ? bytes.indexOf(NEWLINE) + 1 : 0;
  const lines = end > start ? splitLines(bytes.subarray(start, end)) : [];
  return { lines: lines.slice(-count), offset: size - length + end };
}

/**
 * The whole lines appended since `offset`. A file now shorter than `offset` was replaced or truncated:
 * it is read from the start again. A line longer than MAX_LOG_READ_BYTES is handed over in pieces
 * rather than never.
 */
export async function readNewLines(file: string, offset: number): Promise<LogChunk> {
  const size = await sizeOf(file);
  if (size < 0) return { lines: [], offset };
  const from = size < offset ? 0 : offset;
  if (size === from) return { lines: [], offset: from };
  const bytes = await readRange(file, from, Math.min(size - from, MAX_LOG_READ_BYTES));
  if (bytes === null) return { lines: [], offset };
  let end = bytes.lastIndexOf(NEWLINE) + 1;
  if (end === 0 && bytes.length === MAX_LOG_READ_BYTES) end = bytes.length;
  return { lines: splitLines(bytes.subarray(0, end)), offset: from + end };
}

export interface FollowLogOptions {
  /** Where to start (from tailLog). */
  readonly offset: number;
  /** Stops following when it aborts. */
  readonly signal: AbortSignal;
  /** Called with each batch of new whole lines, oldest first; the next poll waits for it to settle. */
  readonly onLines: (lines: readonly string[]) => void | Promise<void>;
  /** Checked after each poll: stop when it returns true (the sandbox is gone). */
  readonly done?: () => boolean | Promise<boolean>;
  /** Poll interval (default 200 ms). */
  readonly pollMs?: number;
}

/** Hands over new whole lines until the signal aborts or `done()`; resolves then (never rejects on abort). */
export async function followLog(file: string, options: FollowLogOptions): Promise<void> {
  const pollMs = options.pollMs ?? 200;
  let offset = options.offset;
  while (!options.signal.aborted) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(finish, pollMs);
      function finish(): void {
        clearTimeout(timer);
        options.signal.removeEventListener('abort', finish);
        resolve();
      }
      options.signal.addEventListener('abort', finish, { once: true });
    });
    if (options.signal.aborted) return;
    const chunk = await readNewLines(file, offset);
    offset = chunk.offset;
    if (chunk.lines.length > 0) await options.onLines(chunk.lines);
    if ((await options.done?.()) === true) return;
  }
}
