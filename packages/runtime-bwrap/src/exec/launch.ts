// Starts one bwrap process and, when the sandbox has cgroups, holds the command until bwrap's pid 1 has
// joined them. Plain child_process.spawn, not execa: execa's per-call machinery measured ~6 ms of the
// ~30 ms of an exec of `true` on a loaded 2-core host (bench/README.md of the control package).
//
// Why a handshake instead of a launcher: a process must be in its cgroup BEFORE it forks the command, or
// the command (and a fork bomb) would start outside the limits. bwrap can report and wait by itself:
// `--info-fd 3` makes the outer bwrap write `{"child-pid": N}` (N = the sandbox's pid 1, host pid) right
// after clone(); `--block-fd 4` makes that pid 1 read one byte after setting up the mounts and BEFORE it
// forks the command. We write N into each cgroup.procs, then the byte. No extra process or shell per
// command (a `sh -c 'echo $$ > cgroup.procs; exec bwrap'` launcher would cost an exec and a shell string),
// no cgexec. The outer bwrap (a monitor that never forks again) stays outside: it is not part of the tree.
//
// Every launch also reads pid 1 (without cgroups: `--info-fd` alone) so that whatever ends the outer bwrap
// (timeout, abort, kill(), stop(), a crash) also SIGKILLs the sandbox's pid 1, which makes the kernel kill
// every process of its pid namespace. --die-with-parent alone is not enough: a bwrap killed right after
// clone(), before its child armed PR_SET_PDEATHSIG, leaves the namespace running (seen under load).
import { spawn } from 'node:child_process';
import type { ChildProcess, StdioNull, StdioPipe } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import type { Duplex, Readable, Writable } from 'node:stream';
import {
  DEFAULT_MAX_OUTPUT_BYTES,
  InternalError,
  armTermination,
  collectOutput,
  isSameProcess,
  keepChildAlive,
  processStartTime,
} from '@agentfense/protocol';
import type { OutputCallback } from '@agentfense/protocol';
import { openAnonymous, openShared } from './anonymous-file.js';
import type { CgroupHandshakeFds } from './args.js';
import { leakedDescriptors } from './inherited-fds.js';
import type { SandboxCgroup } from '../cgroups/types.js';
import type { RuntimeLogger } from '../logger.js';

const NO_OUTPUT = Buffer.alloc(0);

/** The fds the handshake uses (the child's stdio[3] and stdio[4]). */
export const HANDSHAKE_FDS: CgroupHandshakeFds = { infoFd: 3, blockFd: 4 };
/**
 * bwrap reads its options from this fd (`--args 5`), NUL-separated, so its own command line — which every
 * process of the sandbox can read as /proc/1/cmdline — holds no host path: only `bwrap --args 5 -- CMD`.
 */
export const ARGS_FD = 5;
/** bwrap loads the seccomp program from this fd (`--seccomp 6`). */
export const SECCOMP_FD = 6;

/** The most JSON bwrap's info fd may send before we call it broken (it sends ~30 bytes). */
const MAX_INFO_BYTES = 4_096;

/** A network namespace bwrap is started in (the sandbox's, made and policed by the host). */
export interface NetnsJoin {
  /** The bind-mounted namespace file. */
  readonly file: string;
  /** The nsenter executable that enters it before becoming the sandbox user and exec'ing bwrap. */
  readonly nsenter: string;
}

export interface LaunchOptions {
  readonly bwrapPath: string;
  /** Start bwrap inside this network namespace (its args then lack `--unshare-net`). */
  readonly netns?: NetnsJoin | undefined;
  /** bwrap's arguments; built with HANDSHAKE_FDS when `cgroup` is set, ending in `-- <command>`. */
  readonly args: readonly string[];
  /** How many of `args` are the command (after the `--`): those stay on bwrap's command line. */
  readonly commandArgc: number;
  /** The host uid/gid bwrap runs as (never root; sandbox-user.ts); null: this process's own. */
  readonly identity: { readonly uid: number; readonly gid: number } | null;
  /** The seccomp BPF program, sent on SECCOMP_FD (when the args hold `--seccomp SECCOMP_FD`). */
  readonly seccomp: Buffer | null;
  readonly cgroup: SandboxCgroup | null;
  /**
   * 'exec': buffered output, stdin from bytes or /dev/null. 'spawn': raw pipes, nothing buffered.
   * 'launcher': the per-sandbox af-init (launcher.ts): stdin /dev/null, output only to the callbacks.
   */
  readonly mode: 'exec' | 'spawn' | 'launcher';
  /**
   * Descriptors from fd 7 on (after SECCOMP_FD): 'pipe' makes a socketpair (Node's stdio pipes are
   * socketpairs on Linux), a number passes that open descriptor. Read back with `launched.extra(i)`.
   */
  readonly extraStdio?: readonly ('pipe' | number)[];
  readonly stdin?: Uint8Array;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** Per-stream output cap in exec mode (default DEFAULT_MAX_OUTPUT_BYTES). */
  readonly maxOutputBytes?: number;
  readonly logger: RuntimeLogger;
  /** Called synchronously once the process exists (before the handshake), e.g. to track it for stop(). */
  readonly onSpawned?: (launched: LaunchedBwrap) => void;
  /** Streaming: each chunk as it arrives, attached before any output can flow. */
  readonly onStdout?: OutputCallback;
  readonly onStderr?: OutputCallback;
  /** Exec mode: false keeps nothing for the result and applies no cap (ExecOptions.keepOutput). */
  readonly keepOutput?: boolean;
}

/** How a bwrap process ended (never a rejection). */
export interface BwrapResult {
  /** Undefined when it did not exit normally (killed by a signal, or never started). */
  readonly exitCode: number | undefined;
  readonly signal: NodeJS.Signals | undefined;
  /** Collected output (exec mode; empty in spawn mode, whose caller reads the streams). */
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  /** Not a clean exit 0: non-zero, a signal, a spawn error or the output cap. */
  readonly failed: boolean;
  /** The spawn error (ENOENT, EACCES, EMFILE, ...), if bwrap could not be started. */
  readonly cause: NodeJS.ErrnoException | undefined;
  readonly shortMessage: string;
  /** An output stream exceeded its cap (bwrap was then killed). */
  readonly isMaxBuffer: boolean;
  readonly durationMs: number;
}

/** A started bwrap: resolves (never rejects) with its result once it exited and its streams closed. */
export type BwrapSubprocess = Promise<BwrapResult> & {
  readonly pid: number | undefined;
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
};

/** Every bwrap still running in this process: SIGKILLed if the process exits (bwrap then tears down). */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;

let devNull: number | undefined;

/**
 * stdio entries from position `from` on that put /dev/null over every descriptor this process inherited
 * without close-on-exec (inherited-fds.ts); empty when there is none.
 */
function coverLeaked(from: number): (number | 'ignore')[] {
  const leaked = leakedDescriptors(from);
  if (leaked.length === 0) return [];
  devNull ??= openSync('/dev/null', 'r+'); // close-on-exec itself; kept for the life of the process
  const cover = new Set(leaked);
  const last = leaked[leaked.length - 1] ?? from;
  const entries: (number | 'ignore')[] = [];
  for (let fd = from; fd <= last; fd++) entries.push(cover.has(fd) ? devNull : 'ignore');
  return entries;
}

/** Spawns bwrap with an empty environment and collects its result; `stdio` covers fds 0-4. */
function startBwrap(
  options: LaunchOptions,
  stdio: readonly (StdioNull | StdioPipe)[],
): { child: ChildProcess; subprocess: BwrapSubprocess } {
  const started = performance.now();
  const split = options.args.length - options.commandArgc - 1;
  if (options.args[split] !== '--') throw new InternalError('bwrap argv does not end in `-- <command>`');
  // bwrap itself gets an empty environment; the sandbox's is built with --clearenv/--setenv anyway. Its
  // cwd is `/` (the control plane's may not be reachable by the sandbox user); uid/gid drop root before
  // exec (libuv also clears the supplementary groups), so bwrap holds no capability on the host.
  // bwrap's options and the seccomp program: anonymous files (anonymous-file.ts), pipes where those are
  // unavailable. Our descriptors are closed right after the spawn; bwrap holds its own copies.
  const bwrapOptions = Buffer.from(`${options.args.slice(0, split).join('\0')}\0`);
  const argsFd = openAnonymous(bwrapOptions);
  const seccompFd = options.seccomp === null ? null : openShared(options.seccomp);
  let child: ChildProcess;
  try {
    // In a sandbox's own network namespace: nsenter (as root) enters it, drops to the sandbox user and its
    // group (no supplementary groups) and execs bwrap, which keeps the same pid.
    const bwrapArgv = ['--args', String(ARGS_FD), ...options.args.slice(split)];
    const { file, argv } =
      options.netns === undefined
        ? { file: options.bwrapPath, argv: bwrapArgv }
        : {
            file: options.netns.nsenter,
            argv: [
              `--net=${options.netns.file}`,
              ...(options.identity === null
                ? []
                : ['-S', String(options.identity.uid), '-G', String(options.identity.gid)]),
              '--',
              options.bwrapPath,
              ...bwrapArgv,
            ],
          };
    child = spawn(file, argv, {
      stdio: [
        ...stdio,
        argsFd ?? 'pipe', // ARGS_FD
        options.seccomp === null ? 'ignore' : (seccompFd ?? 'pipe'), // SECCOMP_FD
        ...(options.extraStdio ?? []),
        ...coverLeaked(SECCOMP_FD + 1 + (options.extraStdio?.length ?? 0)),
      ],
      env: {},
      cwd: '/',
      ...(options.identity === null || options.netns !== undefined
        ? {}
        : { uid: options.identity.uid, gid: options.identity.gid }),
    });
  } finally {
    if (argsFd !== null) closeSync(argsFd);
    if (seccompFd !== null) closeSync(seccompFd);
  }
  const extra = child.stdio as readonly unknown[];
  if (argsFd === null) sendAll(extra[ARGS_FD] as Writable | null, bwrapOptions);
  if (options.seccomp !== null && seccompFd === null)
    sendAll(extra[SECCOMP_FD] as Writable | null, options.seccomp);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const c of running) c.kill('SIGKILL');
    });
  }
  running.add(child);
  const buffered = options.mode === 'exec';
  const cap = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  let isMaxBuffer = false;
  // Exec mode: output kept up to the cap and streamed with back-pressure (the protocol's collectOutput);
  // once either stream overflows the outer bwrap is stopped (its exit kills the namespace). Spawn mode's
  // caller reads the streams itself.
  const collect = (stream: Readable | null, callback: OutputCallback | undefined): (() => Buffer) => {
    if (stream === null || !buffered) return () => NO_OUTPUT;
    const output = collectOutput(stream, {
      cap,
      ...(options.keepOutput === undefined ? {} : { keep: options.keepOutput }),
      callback,
      onOverflow: () => {
        isMaxBuffer = true;
        child.kill('SIGTERM');
      },
      onCallbackError: (err) =>
        options.logger.warn({ err }, 'an output callback failed; output is still collected'),
    });
    return () => output.toBuffer();
  };
  const stdout = collect(child.stdout, options.onStdout);
  const stderr = collect(child.stderr, options.onStderr);
  if (options.stdin !== undefined && child.stdin !== null) {
    // A command that does not read its stdin closes the pipe early: EPIPE is not an error of ours.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.stdin);
  }
  const result = new Promise<BwrapResult>((resolve) => {
    let spawnError: NodeJS.ErrnoException | undefined;
    const finish = (code: number | null, signal: NodeJS.Signals | null): void => {
      running.delete(child);
      const exitCode = code ?? undefined;
      const sig = signal ?? undefined;
      resolve({
        exitCode,
        signal: sig,
        stdout: stdout(),
        stderr: stderr(),
        failed: spawnError !== undefined || isMaxBuffer || exitCode !== 0,
        cause: spawnError,
        shortMessage:
          spawnError !== undefined
            ? `Command failed: ${spawnError.message}`
            : isMaxBuffer
              ? `Command's output exceeded ${cap} bytes`
              : sig !== undefined
                ? `Command was killed with ${sig}`
                : `Command failed with exit code ${String(exitCode)}`,
        isMaxBuffer,
        durationMs: performance.now() - started,
      });
    };
    child.once('error', (err) => {
      spawnError ??= err;
      // No process was created: no 'exit' will come.
      if (child.pid === undefined) finish(null, null);
    });
    // Settles once bwrap exited and its output streams ended (all output collected). Not the child's
    // 'close': that also waits for the handshake fds, which nobody reads once the pid is known.
    child.once('exit', (code, signal) => {
      void Promise.all([closed(child.stdout), closed(child.stderr)]).then(() => {
        for (const extra of child.stdio.slice(3)) extra?.destroy();
        finish(code, signal);
      });
    });
  });
  const subprocess = Object.assign(result, {
    pid: child.pid,
    stdin: child.stdin,
    stdout: child.stdout,
    stderr: child.stderr,
  });
  return { child, subprocess };
}

/** Why we ended a command ourselves (null: it ended on its own or was killed from inside). */
export type TerminationReason = 'timeout' | 'abort' | 'kill' | null;

/** A launched bwrap and the one way to end it. */
export interface LaunchedBwrap {
  readonly subprocess: BwrapSubprocess;
  /** The host pid of the sandbox's pid 1 (bwrap's `--info-fd` report); rejects if bwrap never cloned. */
  readonly pid1: Promise<number>;
  /** The stream of `extraStdio[i]` when it was 'pipe' (a duplex socket), else null. */
  readonly extra: (i: number) => Duplex | null;
  /**
   * Ends the whole sandboxed tree: waits for bwrap to report its pid 1 (written right after clone(), so
   * this is immediate unless bwrap failed to start), SIGKILLs it — the kernel then kills every process of
   * its pid namespace — and SIGKILLs the outer bwrap. Idempotent; the first reason given is kept.
   */
  terminate(reason: Exclude<TerminationReason, null>): Promise<void>;
  /** Why it was terminated, if it was. */
  readonly reason: () => TerminationReason;
  /** Whether bwrap and its pipes keep this process's event loop alive (yes by default; keep-alive.ts). */
  keepProcessAlive(keep: boolean): void;
}

/**
 * Starts bwrap; resolves once the command is allowed to run (after the cgroup handshake, if any).
 * Timeouts and aborts are handled here rather than by execa: execa would kill the outer bwrap at once,
 * possibly between clone() and the pid report, leaving a namespace nobody can find.
 */
export async function launchBwrap(options: LaunchOptions): Promise<LaunchedBwrap> {
  const { cgroup, mode } = options;
  const stdin = mode === 'spawn' || options.stdin !== undefined ? 'pipe' : 'ignore';
  if (mode === 'launcher' && options.stdin !== undefined)
    throw new InternalError('the launcher takes no stdin bytes');
  const stdio: (StdioNull | StdioPipe)[] = [
    stdin,
    'pipe',
    'pipe',
    'pipe', // info fd
    cgroup === null ? 'ignore' : 'pipe', // block fd
    // ARGS_FD and SECCOMP_FD: added by startBwrap
  ];
  const { child, subprocess } = startBwrap(options, stdio);

  const namespace = readChildPid(child.stdio[3] as Readable).then((pid) => ({
    pid,
    startTime: processStartTime(pid) ?? null,
  }));
  // Whatever ends the outer bwrap (a crash, the exit hook, the output cap) also ends the namespace.
  // Attached before anything is awaited, so no exit can be missed.
  child.once('exit', () => {
    namespace
      .then(killNamespace, () => undefined)
      .catch((err: unknown) => {
        options.logger.warn({ err }, 'could not kill the sandbox pid namespace');
      });
  });

  let reason: TerminationReason = null;
  let terminating: Promise<void> | undefined;
  const terminate = (why: Exclude<TerminationReason, null>): Promise<void> => {
    reason ??= why;
    terminating ??= (async () => {
      const ns = await namespace.catch(() => null); // no pid: bwrap never got to clone()
      if (ns !== null) killNamespace(ns);
      child.kill('SIGKILL');
    })();
    return terminating;
  };
  armTermination({
    timeoutMs: options.timeoutMs,
    signal: options.signal,
    terminate,
    onError: (err) => options.logger.warn({ err }, 'could not terminate bwrap'),
    ended: subprocess,
  });

  const pid1 = namespace.then((ns) => ns.pid);
  pid1.catch(() => undefined); // reported through the result when bwrap never started
  const launched: LaunchedBwrap = {
    subprocess,
    pid1,
    extra: (i) => {
      const stream = (child.stdio as readonly unknown[])[SECCOMP_FD + 1 + i];
      return options.extraStdio?.[i] === 'pipe' ? ((stream as Duplex | null | undefined) ?? null) : null;
    },
    terminate,
    reason: () => reason,
    keepProcessAlive: (keep) => keepChildAlive(child, keep),
  };
  options.onSpawned?.(launched);
  if (options.mode !== 'exec') {
    forward(subprocess.stdout, options.onStdout, options.logger);
    forward(subprocess.stderr, options.onStderr, options.logger);
  }
  if (cgroup === null) {
    // bwrap writes the pid right after clone(), so this costs ~nothing; a bwrap that never started
    // (missing binary) is reported by the caller from the result.
    await namespace.catch((err: unknown) => options.logger.debug({ err }, 'bwrap sent no child pid'));
    return launched;
  }

  const block = child.stdio[4] as Writable;
  try {
    const childPid = (await namespace).pid;
    await cgroup.attach(childPid);
  } catch (err) {
    // The command has not started (pid 1 is still blocked): kill bwrap and report; never release it
    // outside its limits.
    await terminate('kill');
    await subprocess;
    throw new InternalError(
      `could not place the sandbox's command in its cgroups: ${(err as Error).message}`,
      { cause: err },
    );
  }
  block.on('error', (err: Error) => options.logger.debug({ err }, 'bwrap exited before it was released'));
  block.end('1');
  return launched;
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

/** Writes `data` and closes the stream (bwrap reads to EOF); a bwrap that died early is reported elsewhere. */
function sendAll(stream: Writable | null, data: Buffer): void {
  if (stream === null) return;
  stream.on('error', () => undefined);
  stream.end(data);
}

/** Resolves when `stream` has closed (at once for none). */
function closed(stream: Readable | null): Promise<void> {
  if (stream === null || stream.closed) return Promise.resolve();
  return new Promise((resolve) => stream.once('close', () => resolve()));
}

/**
 * Spawn mode: calls `callback` with each chunk (the caller reads the streams too, so no back-pressure
 * here); a throwing callback is logged, never allowed to crash the process.
 */
function forward(stream: Readable | null, callback: OutputCallback | undefined, logger: RuntimeLogger): void {
  if (stream === null || callback === undefined) return;
  stream.on('data', (chunk: Buffer) => {
    try {
      callback(chunk);
    } catch (err) {
      logger.warn({ err }, 'an output callback threw; output is still collected');
    }
  });
}

/** SIGKILLs the sandbox's pid 1 if it is still the process we started (never a recycled pid). */
function killNamespace(ns: { pid: number; startTime: string | null }): void {
  if (!isSameProcess(ns.pid, ns.startTime)) return;
  try {
    process.kill(ns.pid, 'SIGKILL');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}
