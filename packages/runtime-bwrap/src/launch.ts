// Starts one bwrap process with execa and, when the sandbox has cgroups, holds the command until bwrap's
// pid 1 has joined them.
//
// Why a handshake instead of a launcher: a process must be in its cgroup BEFORE it forks the command, or
// the command (and a fork bomb) would start outside the limits. bwrap can report and wait by itself:
// `--info-fd 3` makes the outer bwrap write `{"child-pid": N}` (N = the sandbox's pid 1, host pid) right
// after clone(); `--block-fd 4` makes that pid 1 read one byte after setting up the mounts and BEFORE it
// forks the command. We write N into each cgroup.procs, then the byte. No extra process or shell per
// command (a `sh -c 'echo $$ > cgroup.procs; exec bwrap'` launcher would cost an exec and a shell string),
// no cgexec. The outer bwrap (a monitor that never forks again) stays outside: it is not part of the tree.
import type { Readable, Writable } from 'node:stream';
import { execa } from 'execa';
import type { ResultPromise } from 'execa';
import { InternalError } from '@agentfense/protocol';
import type { CgroupHandshakeFds } from './args.js';
import type { SandboxCgroup } from './cgroups/types.js';
import type { RuntimeLogger } from './logger.js';

/** The fds the handshake uses (execa's stdio[3] and stdio[4]). */
export const HANDSHAKE_FDS: CgroupHandshakeFds = { infoFd: 3, blockFd: 4 };

/**
 * How long the outer bwrap may ignore a SIGTERM before execa sends SIGKILL. bwrap does not handle
 * SIGTERM, so it dies at once and its pid 1 follows (die-with-parent); this only covers a bwrap stuck in
 * an uninterruptible FUSE request, which SIGKILL also ends once the request is aborted.
 */
export const FORCE_KILL_AFTER_MS = 2_000;

/**
 * Default cap on each of stdout/stderr of a buffered command; the command is killed when it is exceeded.
 * Hard maximum: execa 9 copies the whole output into its error message when the cap is hit, and at
 * 64 MiB that crashes V8 (measured: "invalid size error" in a regexp over the message), so we stay well
 * below it.
 */
export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
export const MAX_OUTPUT_BYTES_LIMIT = 32 * 1024 * 1024;

/** The most JSON bwrap's info fd may send before we call it broken (it sends ~30 bytes). */
const MAX_INFO_BYTES = 4_096;

export interface LaunchOptions {
  readonly bwrapPath: string;
  /** bwrap's arguments; built with HANDSHAKE_FDS when `cgroup` is set. */
  readonly args: readonly string[];
  readonly cgroup: SandboxCgroup | null;
  /** 'exec': buffered output, stdin from bytes or /dev/null. 'spawn': raw pipes, nothing buffered. */
  readonly mode: 'exec' | 'spawn';
  readonly stdin?: Uint8Array;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** Per-stream output cap in exec mode (default DEFAULT_MAX_OUTPUT_BYTES). */
  readonly maxOutputBytes?: number;
  readonly logger: RuntimeLogger;
  /** Called synchronously once the process exists (before the handshake), e.g. to track it for stop(). */
  readonly onSpawned?: (subprocess: BwrapSubprocess) => void;
  /** Streaming: each chunk as it arrives, attached before any output can flow. */
  readonly onStdout?: (chunk: Buffer) => void;
  readonly onStderr?: (chunk: Buffer) => void;
}

/** A started bwrap, already in its cgroups (if any) and released. */
export type BwrapSubprocess = ResultPromise<{
  reject: false;
  encoding: 'buffer';
  stripFinalNewline: false;
}>;

/**
 * Starts bwrap; resolves once the command is allowed to run (after the cgroup handshake, if any). The
 * subprocess is wrapped in an object because it is itself a promise: returning it bare from an async
 * function would wait for the process to exit.
 */
export async function launchBwrap(options: LaunchOptions): Promise<{ readonly subprocess: BwrapSubprocess }> {
  const { cgroup, mode } = options;
  const stdin = mode === 'spawn' ? 'pipe' : (options.stdin ?? 'ignore');
  const stdio = cgroup === null ? [stdin, 'pipe', 'pipe'] : [stdin, 'pipe', 'pipe', 'pipe', 'pipe'];
  const subprocess = execa(options.bwrapPath, options.args, {
    stdio: stdio as ['pipe', 'pipe', 'pipe'],
    reject: false,
    encoding: 'buffer',
    stripFinalNewline: false,
    // bwrap itself gets an empty environment; the sandbox's is built with --clearenv/--setenv anyway.
    env: {},
    extendEnv: false,
    // Kill bwrap if the control plane exits (bwrap's --die-with-parent then takes the sandbox down).
    cleanup: true,
    forceKillAfterDelay: FORCE_KILL_AFTER_MS,
    // Never let execa hold the handshake fds as outputs.
    buffer:
      mode === 'spawn'
        ? false
        : cgroup === null
          ? true
          : { stdout: true, stderr: true, fd3: false, fd4: false },
    maxBuffer: options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
    ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
    ...(options.signal === undefined ? {} : { cancelSignal: options.signal }),
  }) as unknown as BwrapSubprocess;
  options.onSpawned?.(subprocess);
  forward(subprocess.stdout, options.onStdout, options.logger);
  forward(subprocess.stderr, options.onStderr, options.logger);
  if (cgroup === null) return { subprocess };

  const info = subprocess.stdio[3] as Readable;
  const block = subprocess.stdio[4] as Writable;
  try {
    const childPid = await readChildPid(info);
    await cgroup.attach(childPid);
  } catch (err) {
    // The command has not started (pid 1 is still blocked): kill bwrap and report; never release it
    // outside its limits.
    subprocess.kill('SIGKILL');
    await subprocess;
    throw new InternalError(
      `could not place the sandbox's command in its cgroups: ${(err as Error).message}`,
      { cause: err },
    );
  }
  block.on('error', (err: Error) => options.logger.debug({ err }, 'bwrap exited before it was released'));
  block.end('1');
  return { subprocess };
}

/** Reads `{"child-pid": N}` from bwrap's info fd; rejects if bwrap exits first. */
function readChildPid(info: Readable): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    let done = false;
    const onData = (chunk: Buffer): void => {
      text += chunk.toString('utf8');
      if (text.length > MAX_INFO_BYTES) {
        finish(new Error('bwrap info fd sent too much data'));
        return;
      }
      // bwrap writes one small object ending in `}`: parse only once it is complete.
      if (!text.includes('}')) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        finish(new Error(`unparsable bwrap info ${JSON.stringify(text)}: ${(err as Error).message}`));
        return;
      }
      const pid = (parsed as { 'child-pid'?: unknown })['child-pid'];
      if (typeof pid === 'number' && Number.isInteger(pid) && pid > 0) finish(null, pid);
      else finish(new Error(`unexpected bwrap info: ${text}`));
    };
    const onEnd = (): void => finish(new Error('bwrap exited before reporting its child pid'));
    const onError = (err: Error): void => finish(err);
    const finish = (err: Error | null, pid?: number): void => {
      if (done) return;
      done = true;
      info.off('data', onData).off('end', onEnd).off('error', onError);
      // Keep draining (bwrap closes the fd right after writing) so the stream can end and be cleaned up.
      info.resume();
      if (err !== null) reject(err);
      else resolve(pid as number);
    };
    info.on('data', onData).on('end', onEnd).on('error', onError);
  });
}

/** Calls `callback` with each chunk; a throwing callback is logged, never allowed to crash the process. */
function forward(
  stream: Readable | null,
  callback: ((chunk: Buffer) => void) | undefined,
  logger: RuntimeLogger,
): void {
  if (stream === null || callback === undefined) return;
  stream.on('data', (chunk: Buffer) => {
    try {
      callback(chunk);
    } catch (err) {
      logger.warn({ err }, 'an output callback threw; output is still collected');
    }
  });
}
