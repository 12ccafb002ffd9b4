// The run helper: one per data directory, root like the control plane, started in the background by the
// first in-process `agentfense run` (spawn.ts). It keeps an open control plane (database, recovery done,
// an idle worker, the runtime's host checks) and serves each later `run` of that data directory over a
// Unix socket in it (client.ts), through the same `run` command code as in-process (commands/run.ts with
// CliMode.helper). One per data directory: it holds an flock on <data>/run-helper.lock for its lifetime.
// It stops taking runs when idle for a while, when its socket is removed or replaced, and when the build on
// disk changes; runs in progress then finish (a user's command is not killed for any of those). On
// SIGTERM/SIGINT/SIGHUP, or when its data directory disappears, it stops its runs as a signal to their
// client would. Then it closes the control plane (workers, mounts), removing its socket if still its own.
import {
  renameSync,
  statSync,
  unlinkSync,
  chmodSync,
  openSync,
  closeSync,
  constants as fsConstants,
} from 'node:fs';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { CancelledError } from '@agentfense/protocol/core';
import type { ControlPlane } from '../../control-plane.js';
import type { CliIo, Interrupt } from '../io.js';
import { runCli } from '../main.js';
import { buildStamp } from './build-stamp.js';
import { lockExclusive, peerOf } from './peercred.js';
import { MAX_STDIN_BYTES, stdinTooLarge } from '../stdin-limit.js';
import { SpareSandbox } from '../../sandboxes/spare.js';
import {
  FRAME,
  dataFrames,
  frame,
  frameReader,
  helperAnswers,
  helperSocketPath,
  processTraits,
  relevantEnv,
  sameEnvironment,
} from './protocol.js';
import type { HelperRequest } from './protocol.js';

/** Turns the helper's spare sandboxes off (`0`); on otherwise (sandboxes/spare.ts). */
export const RUN_HELPER_SPARE_ENV = 'AGENTFENSE_RUN_HELPER_SPARE';

export interface RunHelperOptions {
  readonly dataDir: string;
  /** Exit after this long without a run. */
  readonly idleMs: number;
  /** How often the socket, data directory and build are checked. */
  readonly checkMs?: number;
}

/** A connection that sends no request within this long is closed. */
const REQUEST_WAIT_MS = 5_000;
const MAX_SOCKET_PATH = 107;

/** A path for bind/connect: itself, or through its directory's fd when too long for sun_path. */
function viaDirFd(path: string): { target: string; close(): void } {
  if (Buffer.byteLength(path) <= MAX_SOCKET_PATH) return { target: path, close: () => undefined };
  const fd = openSync(dirname(path), fsConstants.O_RDONLY | fsConstants.O_DIRECTORY);
  return { target: `/proc/self/fd/${fd}/${basename(path)}`, close: () => closeSync(fd) };
}

/** Opens the control plane and serves runs until the helper has a reason to exit; resolves then. */
export async function serveRuns(options: RunHelperOptions): Promise<void> {
  const path = helperSocketPath(options.dataDir);
  // One helper per data directory: two first runs at once start one each, and only one gets the lock
  // (held until this process ends: the kernel drops it however it ends). The fd is never closed.
  const lock = openSync(
    join(options.dataDir, 'run-helper.lock'),
    fsConstants.O_RDWR | fsConstants.O_CREAT | fsConstants.O_NOFOLLOW,
    0o600,
  );
  if (!lockExclusive(lock)) return;
  // A helper of an older build (no lock) still answering: leave the data directory to it.
  if (await helperAnswers(path)) return;
  const { ControlPlane } = await import('../../control-plane.js');
  // One idle worker ahead (a start is a mount, not a process start), no Docker containers ahead (the
  // helper serves bwrap runs only: client.ts), the runtime's host checks done now.
  const plane = await ControlPlane.open({
    dataDir: options.dataDir,
    workerPoolSize: 1,
    dockerPoolSize: 0,
    prewarm: 'bwrap',
  });
  const helper = new RunHelper(plane, path, options);
  try {
    await helper.listen();
    await helper.closed;
  } finally {
    await helper.shutdown('done', { interrupt: true });
    await plane.close();
  }
}

interface ActiveRun {
  readonly interrupt: (name: string) => void;
  readonly done: Promise<void>;
}

class RunHelper {
  readonly #plane: ControlPlane;
  readonly #path: string;
  readonly #options: RunHelperOptions;
  readonly #stamp = buildStamp();
  readonly #env = relevantEnv(process.env);
  readonly #traits = processTraits();
  readonly #uid = process.getuid?.() ?? 0;
  readonly #active = new Set<ActiveRun>();
  readonly #spare: SpareSandbox | undefined;
  #server: Server | undefined;
  #ino: number | undefined;
  readonly #dataDirIno: number | undefined;
  #idleSince = Date.now();
  #timer: NodeJS.Timeout | undefined;
  #closing = false;
  #close!: () => void;
  /** Resolves when the helper decided to exit. */
  readonly closed = new Promise<void>((resolve) => (this.#close = resolve));

  constructor(plane: ControlPlane, path: string, options: RunHelperOptions) {
    this.#plane = plane;
    this.#path = path;
    this.#options = options;
    this.#spare = process.env[RUN_HELPER_SPARE_ENV] === '0' ? undefined : new SpareSandbox(plane);
    this.#dataDirIno = statSync(options.dataDir, { throwIfNoEntry: false })?.ino;
  }

  get #log() {
    return this.#plane.logger;
  }

  async listen(): Promise<void> {
    // Bound under a name of its own, made private, then renamed into place: a client never meets a
    // socket of the wrong mode, and a stale socket of a dead helper is simply replaced.
    const temporary = `${this.#path}.${process.pid}`;
    const bind = viaDirFd(temporary);
    const server = createServer((socket) => this.#accept(socket));
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(bind.target, () => resolve());
      });
    } finally {
      bind.close();
    }
    chmodSync(temporary, 0o600);
    renameSync(temporary, this.#path);
    this.#server = server;
    this.#ino = statSync(this.#path).ino;
    this.#timer = setInterval(() => this.#check(), this.#options.checkMs ?? 1_000);
    for (const name of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
      process.on(name, () => void this.shutdown(name, { interrupt: true }));
    }
    this.#log.info({ socket: this.#path, idleMs: this.#options.idleMs }, 'run helper ready');
  }

  /**
   * Exits when idle, or when the socket is gone or no longer ours (letting runs in progress finish), or
   * when the data directory is gone (stopping them: their sandboxes' files went with it). Checked while
   * draining too, for the last case.
   */
  #check(): void {
    if (this.#dataDirRemoved()) {
      void this.shutdown('its data directory was removed', { interrupt: true, removed: true });
      return;
    }
    if (this.#closing) return;
    const current = statSync(this.#path, { throwIfNoEntry: false });
    if (current === undefined || current.ino !== this.#ino) {
      void this.shutdown('its socket was removed or replaced', { interrupt: false });
    } else if (this.#active.size === 0 && Date.now() - this.#idleSince >= this.#options.idleMs) {
      void this.shutdown('idle', { interrupt: false });
    }
  }

  /**
   * Whether the data directory is being or was removed: it is gone, another directory took its name, or
   * its database is gone (`rm -rf` removes that early and then fails with EBUSY on a spare's mount, so
   * the directory itself may stay).
   */
  #dataDirRemoved(): boolean {
    const current = statSync(this.#options.dataDir, { throwIfNoEntry: false });
    return (
      current === undefined ||
      current.ino !== this.#dataDirIno ||
      statSync(this.#plane.layout.database, { throwIfNoEntry: false }) === undefined
    );
  }

  /**
   * Stops taking runs and resolves `closed` once the runs in progress are done. With `interrupt` (a real
   * signal to the helper, its data directory gone) they are stopped as a signal to their client would
   * stop them; without (idle, socket replaced, build changed) they run to their end. A later call with
   * `interrupt` during a drain stops them then.
   */
  async shutdown(
    reason: string,
    { interrupt, removed = false }: { interrupt: boolean; removed?: boolean },
  ): Promise<void> {
    if (interrupt) for (const run of this.#active) run.interrupt('SIGTERM');
    // The spare first (its mount is what a `rm -rf` of the data directory fails on), and without a
    // destroy, which would make the trash directory again in a data directory being removed.
    if (removed) await this.#spare?.abandon();
    if (this.#closing) return;
    this.#closing = true;
    this.#log.info({ reason, running: this.#active.size, interrupt }, 'run helper exiting');
    this.#server?.close();
    // Unlinked only while it is ours: a successor's socket stays.
    if (statSync(this.#path, { throwIfNoEntry: false })?.ino === this.#ino) {
      try {
        unlinkSync(this.#path);
      } catch {
        // removed meanwhile
      }
    }
    // Runs accepted meanwhile are in #active too: wait until none is left.
    while (this.#active.size > 0) await Promise.all([...this.#active].map((run) => run.done));
    if (this.#timer !== undefined) clearInterval(this.#timer);
    // Checked again: the removal may have begun with the socket, while the helper was draining.
    if (this.#dataDirRemoved()) await this.#spare?.abandon();
    else await this.#spare?.close();
    this.#close();
  }

  #accept(socket: Socket): void {
    let peer: { uid: number; pid: number };
    try {
      peer = peerOf(socket);
    } catch (err) {
      this.#log.warn({ err }, 'run helper: no peer credentials; connection refused');
      socket.destroy();
      return;
    }
    if (peer.uid !== this.#uid) {
      // Only the helper's own uid (root, like the control plane) may run anything through it.
      this.#log.warn({ uid: peer.uid, pid: peer.pid }, 'run helper: connection from another uid refused');
      socket.destroy();
      return;
    }
    const wait = setTimeout(() => socket.destroy(), REQUEST_WAIT_MS);
    let request: HelperRequest | undefined;
    let run: ClientRun | undefined;
    const read = frameReader((type, payload) => {
      if (run !== undefined) {
        run.frame(type, payload);
        return;
      }
      if (type !== FRAME.request) throw new Error(`expected a request, got frame type ${type}`);
      clearTimeout(wait);
      request = parseRequest(payload);
      const declined = this.#declineReason(request);
      if (declined !== undefined) {
        socket.end(frame(FRAME.decline, declined));
        return;
      }
      run = new ClientRun(socket, request, this.#plane, (removed) => this.#track(removed), this.#spare);
      this.#serve(run);
    });
    socket.on('data', (chunk: Buffer) => {
      try {
        read(chunk);
      } catch (err) {
        this.#log.warn({ err }, 'run helper: bad request; connection closed');
        socket.destroy();
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(wait);
      run?.dropped();
    });
  }

  /** Why `request` must run in-process instead, if it must. */
  #declineReason(request: HelperRequest): string | undefined {
    if (this.#closing) return 'the helper is exiting';
    if (buildStamp() !== this.#stamp) {
      // Runs in progress finish on the old build; new ones run in-process (and start a new helper
      // once this one is gone).
      void this.shutdown('the build on disk changed', { interrupt: false });
      return 'the build on disk changed';
    }
    if (request.dataDir !== this.#options.dataDir) return 'another data directory';
    if (request.argv[0] !== 'run') return 'not a run';
    if (!sameEnvironment(request.env, this.#env)) return 'a different environment';
    if (request.traits.umask !== this.#traits.umask) return 'a different umask';
    if (request.traits.limits !== this.#traits.limits) return 'different resource limits';
    return undefined;
  }

  /** A retired sandbox's teardown: the helper is busy (not idle, not exiting) until it is done. */
  #track(removed: Promise<void>): void {
    const active: ActiveRun = {
      interrupt: () => undefined,
      done: removed.then(
        () => undefined,
        (err: unknown) => this.#log.error({ err }, 'run helper: a retired sandbox was not removed'),
      ),
    };
    this.#active.add(active);
    void active.done.finally(() => {
      this.#active.delete(active);
      this.#idleSince = Date.now();
    });
  }

  #serve(run: ClientRun): void {
    const active: ActiveRun = {
      interrupt: (name) => run.interruptWith(name),
      done: run.execute().then(
        () => undefined,
        (err: unknown) => this.#log.error({ err }, 'run helper: run failed'),
      ),
    };
    this.#active.add(active);
    void active.done.finally(() => {
      this.#active.delete(active);
      this.#idleSince = Date.now();
    });
  }
}

function parseRequest(payload: Buffer): HelperRequest {
  const value = JSON.parse(payload.toString('utf8')) as HelperRequest;
  const strings = (list: unknown): boolean => Array.isArray(list) && list.every((x) => typeof x === 'string');
  if (
    typeof value !== 'object' ||
    value === null ||
    !strings(value.argv) ||
    typeof value.cwd !== 'string' ||
    typeof value.dataDir !== 'string' ||
    typeof value.env !== 'object' ||
    value.env === null ||
    !strings(Object.values(value.env)) ||
    typeof value.clientMs !== 'number' ||
    typeof value.stdoutIsTTY !== 'boolean' ||
    typeof value.stderrIsTTY !== 'boolean' ||
    typeof value.traits !== 'object' ||
    value.traits === null ||
    typeof value.traits.umask !== 'string' ||
    typeof value.traits.limits !== 'string'
  ) {
    throw new Error('malformed run request');
  }
  return value;
}

/** One client's run: its stdin, its signals, its output. */
class ClientRun {
  readonly #socket: Socket;
  readonly #request: HelperRequest;
  readonly #plane: ControlPlane;
  readonly #controller = new AbortController();
  #stdin: Buffer[] = [];
  #stdinBytes = 0;
  #stdinDone!: () => void;
  readonly #stdinEnded = new Promise<void>((resolve) => (this.#stdinDone = resolve));
  #received: string | undefined;
  #signals = 0;
  readonly #origin = performance.now();

  readonly #retiring: (removed: Promise<void>) => void;
  readonly #spare: SpareSandbox | undefined;

  constructor(
    socket: Socket,
    request: HelperRequest,
    plane: ControlPlane,
    retiring: (removed: Promise<void>) => void,
    spare: SpareSandbox | undefined,
  ) {
    this.#socket = socket;
    this.#request = request;
    this.#plane = plane;
    this.#retiring = retiring;
    this.#spare = spare;
  }

  frame(type: number, payload: Buffer): void {
    if (type === FRAME.stdin) {
      if (payload.length === 0) this.#stdinDone();
      else {
        // Past the cap the rest is counted and dropped: `run` then fails with --stdin's error (status 2).
        this.#stdinBytes += payload.length;
        if (this.#stdinBytes <= MAX_STDIN_BYTES) this.#stdin.push(Buffer.from(payload));
        else this.#stdin = [];
      }
    } else if (type === FRAME.signal) {
      const name = payload.toString('utf8');
      if (!(name in osConstants.signals)) throw new Error(`unknown signal ${name}`);
      // The client exits by itself at the third (client.ts); the first stops the run, like in-process.
      this.#signals++;
      if (this.#signals === 1) this.interruptWith(name);
    } else {
      throw new Error(`unexpected frame type ${type} during a run`);
    }
  }

  /** The client is gone (SIGKILLed, or it exited at a third signal): stop the command, remove the sandbox. */
  dropped(): void {
    this.interruptWith('SIGHUP');
    this.#stdinDone();
  }

  interruptWith(name: string): void {
    if (this.#received !== undefined) return;
    this.#received = name;
    this.#controller.abort(new CancelledError(`interrupted by ${name}`));
  }

  async execute(): Promise<void> {
    const socket = this.#socket;
    // Split into frames the client accepts (a --json object or a --diff is one write, up to tens of MiB).
    // What the socket cannot take yet waits in its buffer: a run's output is bounded (16 MiB per stream,
    // then the command is killed), and the command's output cannot be paused from here; EXIT goes after
    // all of it.
    const send = (type: number) => (chunk: string | Uint8Array) => {
      let flowing = true;
      if (!socket.destroyed) {
        for (const part of dataFrames(type, typeof chunk === 'string' ? Buffer.from(chunk) : chunk))
          flowing = socket.write(part);
      }
      return flowing;
    };
    // The client's terminals as the writers' isTTY: --diff escapes the agent's control characters for a
    // terminal (run.ts), exactly as in-process.
    const stdout = { write: send(FRAME.stdout), isTTY: this.#request.stdoutIsTTY };
    const stderr = { write: send(FRAME.stderr), isTTY: this.#request.stderrIsTTY };
    const io: CliIo = { stdout, stderr };
    const received = (): string | undefined => this.#received;
    const interrupt: Interrupt = {
      signal: this.#controller.signal,
      get received() {
        return received();
      },
      dispose: () => undefined,
    };
    socket.write(frame(FRAME.accept));
    const status = await runCli(this.#request.argv, io, {
      helper: {
        plane: this.#plane,
        cwd: this.#request.cwd,
        stdin: async () => {
          await this.#stdinEnded;
          if (this.#stdinBytes > MAX_STDIN_BYTES) throw stdinTooLarge();
          const whole = Buffer.concat(this.#stdin);
          this.#stdin = []; // held once, by the run
          return whole;
        },
        interrupt,
        originMs: this.#origin - this.#request.clientMs,
        retiring: this.#retiring,
        ...(this.#spare === undefined ? {} : { spare: this.#spare }),
      },
    });
    const exit = Buffer.alloc(4);
    exit.writeUInt32LE(status, 0);
    if (!socket.destroyed) socket.end(frame(FRAME.exit, exit));
  }
}
