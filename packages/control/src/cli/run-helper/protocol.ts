// The run helper's wire format and rendezvous (docs/decisions.md "A warm run helper serves one-shot `run`s").
// Kept free of the CLI's modules: the client side runs in the executable's prelude, before the CLI loads.
//
// One connection per `run`. Frames: u32 LE length of what follows · u8 type · payload.
//   client → helper: REQUEST (JSON, first and once) · STDIN (bytes; empty = end) · SIGNAL (its name)
//   helper → client: ACCEPT or DECLINE (a reason; the client then runs in-process, nothing was done) ·
//                    STDOUT / STDERR (bytes) · EXIT (u32 LE status, last)
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { basename, dirname, join } from 'node:path';
import { closeSync, constants as fsConstants, openSync, readFileSync } from 'node:fs';

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
  /** The client's umask and resource limits (processTraits): the helper serves only its own. */
  readonly traits: ProcessTraits;
}

/**
 * What a process passes on to everything it starts besides its environment: the umask (the modes of what
 * --commit creates in DIR) and the resource limits (`ulimit`: what the sandbox's processes inherit). Both
 * are process-wide, so the helper cannot take a client's for one run: it serves a request only when they
 * equal its own, else the client runs in-process with its own.
 */
export interface ProcessTraits {
  /** The `Umask:` line of /proc/self/status (no process.umask() set-and-restore race). */
  readonly umask: string;
  /** /proc/self/limits as the kernel prints it (soft and hard limit of each resource). */
  readonly limits: string;
}

/** This process's umask and resource limits. */
export function processTraits(): ProcessTraits {
  const status = readFileSync('/proc/self/status', 'utf8');
  return {
    umask: /^Umask:\s*(\S+)/m.exec(status)?.[1] ?? '',
    limits: readFileSync('/proc/self/limits', 'utf8'),
  };
}

/**
 * Variables that change what `run` does or where: the helper serves a request only when the client's
 * values equal its own (it was started with the environment of the run that spawned it), else the client
 * runs in-process. AGENTFENSE_* (data dir, launcher, sandbox user…), Docker's, XDG/HOME (data dir),
 * PATH (which bwrap), NODE_*, TMPDIR, and LD_* (LD_PRELOAD, LD_LIBRARY_PATH: the helper passes its whole
 * environment on to its worker and bwrap).
 */
const RELEVANT = /^(AGENTFENSE_|DOCKER_|XDG_|NODE_|LD_)|^(PATH|HOME|TMPDIR)$/;

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

const MAX_SOCKET_PATH = 107;

/**
 * Connects to the Unix socket at `path`; one longer than sockaddr_un's 107 bytes is reached through its
 * directory's fd (/proc/self/fd/N/name).
 */
export function connectUnix(path: string): Promise<Socket> {
  let dirFd: number | undefined;
  let target = path;
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    dirFd = openSync(dirname(path), fsConstants.O_RDONLY | fsConstants.O_DIRECTORY);
    target = `/proc/self/fd/${dirFd}/${basename(path)}`;
  }
  return new Promise<Socket>((resolve, reject) => {
    const socket = connect(target);
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  }).finally(() => {
    if (dirFd !== undefined) closeSync(dirFd);
  });
}

/** Is a helper answering at `path` (a connect succeeds)? A stale socket of a dead helper is not. */
export async function helperAnswers(path: string): Promise<boolean> {
  try {
    (await connectUnix(path)).destroy();
    return true;
  } catch {
    return false;
  }
}
