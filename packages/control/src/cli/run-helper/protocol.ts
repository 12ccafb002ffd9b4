// The run helper's wire format and rendezvous (docs/decisions.md "A warm helper for one-shot runs"). Kept
// free of the CLI's modules: the client side runs in the executable's prelude, before the CLI loads.
//
// One connection per `run`. Frames: u32 LE length of what follows · u8 type · payload.
//   client → helper: REQUEST (JSON, first and once) · STDIN (bytes; empty = end) · SIGNAL (its name)
//   helper → client: ACCEPT or DECLINE (a reason; the client then runs in-process, nothing was done) ·
//                    STDOUT / STDERR (bytes) · EXIT (u32 LE status, last)
import { join } from 'node:path';

export const FRAME = {
  request: 1,
  stdin: 2,
  signal: 3,
  accept: 10,
  decline: 11,
  stdout: 12,
  stderr: 13,
  exit: 14,
} as const;

/** Largest frame accepted (the request carries argv and env; output is sent in OUTPUT_FRAME_BYTES frames). */
export const MAX_FRAME_BYTES = 8 * 1024 * 1024;
/** Largest STDIN/STDOUT/STDERR payload per frame: a bigger write (--json, --diff) is split. */
export const DATA_FRAME_BYTES = 1024 * 1024;

/** Turns the helper path off (`0`); anything else leaves it on. */
export const RUN_HELPER_ENV = 'AGENTFENSE_RUN_HELPER';
/** Seconds an idle helper waits for the next run before it exits (default DEFAULT_IDLE_SECONDS). */
export const RUN_HELPER_IDLE_ENV = 'AGENTFENSE_RUN_HELPER_IDLE';
export const DEFAULT_IDLE_SECONDS = 45;

/** The helper's socket in a data directory (a 0700 directory of root's; the socket itself is 0600). */
export function helperSocketPath(dataDir: string): string {
  return join(dataDir, 'run-helper.sock');
}

/** What the client sends first. */
export interface HelperRequest {
  /** The command line without node and script, starting with `run`. */
  readonly argv: readonly string[];
  /** The client's working directory: relative paths (DIR, --rules) are resolved against it. */
  readonly cwd: string;
  /** The data directory the client resolved (the helper serves exactly one). */
  readonly dataDir: string;
  /** The variables of the client's environment that change what a run does (sameEnvironment). */
  readonly env: Record<string, string>;
  /** ms since the client's node started, when it sent the request (for `-v`'s first step). */
  readonly clientMs: number;
  /** Whether the client's stdout / stderr are terminals: --diff escapes control characters for one. */
  readonly stdoutIsTTY: boolean;
  readonly stderrIsTTY: boolean;
}

/**
 * Variables that change what `run` does or where: the helper serves a request only when the client's
 * values equal its own (it was started with the environment of the run that spawned it), else the client
 * runs in-process. AGENTFENSE_* (data dir, launcher, sandbox user…), Docker's, XDG/HOME (data dir),
 * PATH (which bwrap), NODE_* and TMPDIR.
 */
const RELEVANT = /^(AGENTFENSE_|DOCKER_|XDG_|NODE_)|^(PATH|HOME|TMPDIR)$/;

/** The relevant part of an environment. */
export function relevantEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && RELEVANT.test(name) && name !== RUN_HELPER_IDLE_ENV) out[name] = value;
  }
  return out;
}

/** True when both relevant environments hold the same names with the same values. */
export function sameEnvironment(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

/** `payload` as frames of at most DATA_FRAME_BYTES each (none for an empty payload). */
export function dataFrames(type: number, payload: Uint8Array): Buffer[] {
  const frames: Buffer[] = [];
  for (let at = 0; at < payload.length; at += DATA_FRAME_BYTES)
    frames.push(frame(type, payload.subarray(at, at + DATA_FRAME_BYTES)));
  return frames;
}

/** One frame. */
export function frame(type: number, payload: Uint8Array | string = Buffer.alloc(0)): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const head = Buffer.alloc(5);
  head.writeUInt32LE(body.length + 1, 0);
  head[4] = type;
  return Buffer.concat([head, body]);
}

/** Splits a byte stream into frames; `onFrame` gets each, an oversized or empty one throws. */
export function frameReader(onFrame: (type: number, payload: Buffer) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const length = pending.readUInt32LE(0);
      if (length < 1 || length > MAX_FRAME_BYTES) throw new Error(`bad run-helper frame length ${length}`);
      if (pending.length < 4 + length) break;
      const type = pending[4] as number;
      const payload = pending.subarray(5, 4 + length);
      pending = pending.subarray(4 + length);
      onFrame(type, payload);
    }
  };
}
