// The host's side of one af-init connection: spawn commands, feed their stdin, signal them, read their
// output with backpressure, learn how they ended. Back-pressure is per command: a consumer that falls
// behind has its command PAUSEd (af-init stops reading that command's pipes, so the command blocks on
// them as it would on a terminal), and the other commands of the sandbox carry on.
//
// af-init runs with the agent's uid, so everything it sends is checked as if hostile: frame sizes, frame
// types, ids we never gave out, a second READY/STARTED, output after EXIT. Any violation closes the
// connection (af-init then kills every command and exits) and fails every pending command with
// UnavailableError, as does a connection that closes: the caller falls back or reports the sandbox
// unavailable, it never hangs on a dead launcher.
import { constants as osConstants } from 'node:os';
import { Readable, Writable } from 'node:stream';
import type { Duplex } from 'node:stream';
import { InvalidArgumentError, ProtocolError, UnavailableError } from '@agentfense/protocol';
import {
  AF_INIT_MAX_OUTPUT_CHUNK,
  AF_INIT_MAX_STDIN_CHUNK,
  AF_INIT_PROTOCOL_VERSION,
  LauncherFrameDecoder,
  LauncherFrameType as T,
  encodeLauncherFrame,
  encodeSpawnPayload,
} from './frames.js';
import type { LauncherFrame } from './frames.js';

/** How long connect() waits for READY by default. */
const DEFAULT_READY_TIMEOUT_MS = 10_000;
/**
 * What a paused command's output stream may hold before the whole connection is paused as well. After a
 * PAUSE af-init still sends what it had read (its queue stops growing at 512 KiB) and, at the command's
 * exit, up to 1 MiB more from each pipe; a peer that sends far more ignored the PAUSE, and the connection
 * stops being read until the consumer catches up (af-init runs as the agent: nothing it sends may grow the
 * host's memory without bound).
 */
const MAX_BUFFERED_WHILE_PAUSED = 8 * 1024 * 1024;

/** How a command ended. `failed`: it never started (exec or chdir failed; errno and af-init's message). */
export type LauncherOutcome =
  | { readonly kind: 'exited'; readonly code: number }
  | { readonly kind: 'signaled'; readonly signal: number }
  | { readonly kind: 'failed'; readonly errno: number; readonly message: string };

/** What to run. */
export interface LauncherSpawnOptions {
  readonly argv: readonly string[];
  /** Working directory inside the sandbox. */
  readonly cwd: string;
  /** The complete environment (af-init adds nothing; PATH defaults to the usual system dirs for lookup). */
  readonly env: Readonly<Record<string, string>>;
  /** true: `stdin` is a writable pipe; false (default): the command's stdin is /dev/null. */
  readonly stdin?: boolean;
}

/** A command started through af-init. */
export interface LauncherCommand {
  readonly id: number;
  /** Its stdin pipe (when asked for): ending it closes the command's stdin. */
  readonly stdin: Writable | null;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Its pid in af-init's pid namespace (= its session and process group id); null if it never started. */
  readonly pid: Promise<number | null>;
  /** How it ended; rejects with UnavailableError if the launcher went away first. Streams end before. */
  readonly done: Promise<LauncherOutcome>;
  /** Sends `signal` to the command's process group; a no-op once it ended. */
  signal(signal: NodeJS.Signals | number): void;
}

/** Options of connect(). */
export interface LauncherConnectOptions {
  /** How long to wait for af-init's READY (default 10 s). */
  readonly readyTimeoutMs?: number;
}

interface Pending {
  readonly command: LauncherCommand;
  readonly stdout: Readable;
  readonly stderr: Readable;
  started: boolean;
  /** Its output streams whose consumer is behind: the command is PAUSEd while any is listed. */
  readonly behind: Set<Readable>;
  resolvePid(pid: number | null): void;
  rejectPid(err: Error): void;
  resolveDone(outcome: LauncherOutcome): void;
  rejectDone(err: Error): void;
}

/** The host's end of an af-init connection. Create with `LauncherClient.connect`. */
export class LauncherClient {
  readonly #socket: Duplex;
  readonly #decoder = new LauncherFrameDecoder();
  readonly #commands = new Map<number, Pending>();
  readonly #pings = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
  /** Output streams far past their limit (a peer ignoring PAUSE): the socket stays paused while any is listed. */
  readonly #blocked = new Set<Readable>();
  #nextId = 1;
  #failure: Error | undefined;
  #ready: ((info: { version: number; pid: number }) => void) | undefined;
  readonly #closed: Promise<Error>;
  #resolveClosed!: (err: Error) => void;
  /** af-init's pid in its own pid namespace (from READY). */
  pid = 0;

  private constructor(socket: Duplex) {
    this.#socket = socket;
    this.#closed = new Promise((resolve) => (this.#resolveClosed = resolve));
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (err) =>
      this.#fail(
        new UnavailableError(`the sandbox's launcher connection failed: ${err.message}`, { cause: err }),
      ),
    );
    socket.on('close', () =>
      this.#fail(
        new UnavailableError(
          "the sandbox's launcher (af-init) closed its connection: it exited or was killed",
        ),
      ),
    );
    socket.on('end', () =>
      this.#fail(
        new UnavailableError(
          "the sandbox's launcher (af-init) closed its connection: it exited or was killed",
        ),
      ),
    );
  }

  /** Waits for af-init's READY on `socket`; rejects with UnavailableError (closed, timed out) or ProtocolError. */
  static async connect(socket: Duplex, options: LauncherConnectOptions = {}): Promise<LauncherClient> {
    const client = new LauncherClient(socket);
    const timeoutMs = options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    // Rejects whenever the connection closes, also long after READY: handled here, or that later close
    // is an unhandled rejection (which ends a Node process).
    const closedEarly = client.#closed.then((err) => Promise.reject(err));
    closedEarly.catch(() => undefined);
    try {
      const info = await Promise.race([
        new Promise<{ version: number; pid: number }>((resolve) => (client.#ready = resolve)),
        closedEarly,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new UnavailableError(
                  `the sandbox's launcher (af-init) did not say READY within ${timeoutMs} ms`,
                ),
              ),
            timeoutMs,
          );
        }),
      ]);
      client.pid = info.pid;
      return client;
    } catch (err) {
      client.close();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Settles with the reason once the connection is gone (never rejects). */
  get closed(): Promise<Error> {
    return this.#closed;
  }

  /** false once the connection failed or was closed. */
  get alive(): boolean {
    return this.#failure === undefined;
  }

  /** Starts a command. Throws UnavailableError if the connection is gone, InvalidArgumentError on bad input. */
  spawn(options: LauncherSpawnOptions): LauncherCommand {
    if (this.#failure) throw this.#failure;
    const env = Object.entries(options.env).map(([k, v]) => {
      if (k === '' || k.includes('='))
        throw new InvalidArgumentError(`bad environment variable name ${JSON.stringify(k)}`);
      return `${k}=${v}`;
    });
    const payload = encodeSpawnPayload({
      argv: options.argv,
      cwd: options.cwd,
      env,
      stdinPipe: options.stdin === true,
    });
    const id = this.#takeId();
    const frame = encodeLauncherFrame(T.SPAWN, id, payload);
    const pending = this.#track(id, options.stdin === true);
    this.#socket.write(frame);
    return pending.command;
  }

  /** A round trip to af-init; rejects with UnavailableError if the connection is gone. */
  ping(): Promise<void> {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#takeId();
    return new Promise((resolve, reject) => {
      this.#pings.set(id, { resolve, reject });
      this.#socket.write(encodeLauncherFrame(T.PING, id, Buffer.from('ping')));
    });
  }

  /**
   * Whether the connection keeps this process's event loop alive (yes by default). A launcher waiting for
   * its first command (a container or sandbox kept ahead) need not: af-init ends everything when this
   * process exits and the connection closes.
   */
  keepProcessAlive(keep: boolean): void {
    const socket = this.#socket as Duplex & { ref?: () => void; unref?: () => void };
    if (keep) socket.ref?.();
    else socket.unref?.();
  }

  /** Closes the connection: af-init kills every command and exits. Pending commands fail. Idempotent. */
  close(): void {
    this.#fail(new UnavailableError("the sandbox's launcher connection was closed by the host"));
  }

  #takeId(): number {
    const id = this.#nextId;
    this.#nextId = this.#nextId >= 0xffff_ffff ? 1 : this.#nextId + 1;
    return id;
  }

  #track(id: number, withStdin: boolean): Pending {
    const behind = new Set<Readable>();
    const stdout = this.#output(id, behind);
    const stderr = this.#output(id, behind);
    let resolvePid!: (pid: number | null) => void;
    let rejectPid!: (err: Error) => void;
    let resolveDone!: (o: LauncherOutcome) => void;
    let rejectDone!: (err: Error) => void;
    const pid = new Promise<number | null>((res, rej) => ((resolvePid = res), (rejectPid = rej)));
    const done = new Promise<LauncherOutcome>((res, rej) => ((resolveDone = res), (rejectDone = rej)));
    // Callers may never look at these: an unobserved rejection must not crash the host.
    pid.catch(() => undefined);
    done.catch(() => undefined);
    const stdin = withStdin ? this.#stdin(id) : null;
    const command: LauncherCommand = {
      id,
      stdin,
      stdout,
      stderr,
      pid,
      done,
      signal: (signal) => {
        if (!this.#commands.has(id) || this.#failure) return;
        const signo = typeof signal === 'number' ? signal : osConstants.signals[signal];
        if (!Number.isInteger(signo) || signo <= 0 || signo > 64)
          throw new InvalidArgumentError(`unknown signal ${String(signal)}`);
        const p = Buffer.alloc(4);
        p.writeUInt32LE(signo, 0);
        this.#socket.write(encodeLauncherFrame(T.SIGNAL, id, p));
      },
    };
    const pending: Pending = {
      command,
      stdout,
      stderr,
      started: false,
      behind,
      resolvePid,
      rejectPid,
      resolveDone,
      rejectDone,
    };
    this.#commands.set(id, pending);
    return pending;
  }

  /** A command's stdout or stderr: reading it again after it filled RESUMEs the command. */
  #output(id: number, behind: Set<Readable>): Readable {
    const caughtUp = (): void => {
      if (this.#blocked.delete(stream) && this.#blocked.size === 0 && !this.#failure) this.#socket.resume();
      if (behind.delete(stream) && behind.size === 0) this.#flow(T.RESUME, id);
    };
    const stream: Readable = new Readable({
      read: caughtUp,
      destroy: (err, cb) => {
        caughtUp();
        cb(err);
      },
    });
    return stream;
  }

  /** Sends PAUSE or RESUME for a command that is still running. */
  #flow(type: typeof T.PAUSE | typeof T.RESUME, id: number): void {
    if (this.#failure || !this.#commands.has(id)) return;
    this.#socket.write(encodeLauncherFrame(type, id));
  }

  #stdin(id: number): Writable {
    const stdin = new Writable({
      write: (chunk: Buffer, _encoding, callback) => {
        if (this.#failure || !this.#commands.has(id)) return callback(); // the command is gone: bytes dropped
        for (let at = 0; at < chunk.length; at += AF_INIT_MAX_STDIN_CHUNK) {
          const frame = encodeLauncherFrame(T.STDIN, id, chunk.subarray(at, at + AF_INIT_MAX_STDIN_CHUNK));
          if (at + AF_INIT_MAX_STDIN_CHUNK >= chunk.length) this.#socket.write(frame, () => callback());
          else this.#socket.write(frame);
        }
        if (chunk.length === 0) callback();
      },
      final: (callback) => {
        if (!this.#failure && this.#commands.has(id)) this.#socket.write(encodeLauncherFrame(T.STDIN, id));
        callback();
      },
    });
    stdin.on('error', () => undefined);
    return stdin;
  }

  #onData(chunk: Buffer): void {
    if (this.#failure) return;
    let frames: LauncherFrame[];
    try {
      frames = this.#decoder.push(chunk);
    } catch (err) {
      this.#fail(err as Error);
      return;
    }
    for (const frame of frames) {
      try {
        this.#handle(frame);
      } catch (err) {
        this.#fail(err as Error);
        return;
      }
    }
  }

  #handle({ type, id, payload }: LauncherFrame): void {
    if (type === T.READY) {
      if (id !== 0 || payload.length !== 8 || this.#ready === undefined) throw bad('an unexpected READY');
      const version = payload.readUInt32LE(0);
      if (version !== AF_INIT_PROTOCOL_VERSION) {
        throw new ProtocolError(
          `af-init speaks protocol ${version}, this host ${AF_INIT_PROTOCOL_VERSION}: rebuild it (pnpm build)`,
        );
      }
      const ready = this.#ready;
      this.#ready = undefined;
      ready({ version, pid: payload.readUInt32LE(4) });
      return;
    }
    if (this.#ready !== undefined) throw bad(`frame type ${type} before READY`);
    if (type === T.PONG) {
      const ping = this.#pings.get(id);
      if (!ping) throw bad(`a PONG for id ${id} never pinged`);
      this.#pings.delete(id);
      ping.resolve();
      return;
    }
    const pending = this.#commands.get(id);
    if (!pending) throw bad(`frame type ${type} for id ${id}, which names no running command`);
    switch (type) {
      case T.STARTED:
        if (pending.started || payload.length !== 4) throw bad('a second or malformed STARTED');
        pending.started = true;
        pending.resolvePid(payload.readUInt32LE(0));
        return;
      case T.FAILED: {
        if (pending.started || payload.length < 4) throw bad('FAILED after STARTED, or malformed');
        this.#commands.delete(id);
        const outcome: LauncherOutcome = {
          kind: 'failed',
          errno: payload.readUInt32LE(0),
          message: payload.subarray(4).toString('utf8').slice(0, 1024),
        };
        pending.resolvePid(null);
        pending.stdout.push(null);
        pending.stderr.push(null);
        pending.resolveDone(outcome);
        return;
      }
      case T.STDOUT:
      case T.STDERR: {
        if (!pending.started || payload.length === 0 || payload.length > AF_INIT_MAX_OUTPUT_CHUNK) {
          throw bad('output before STARTED, empty, or over 64 KiB');
        }
        const stream = type === T.STDOUT ? pending.stdout : pending.stderr;
        if (stream.destroyed) return; // the consumer gave up on it: drop
        if (stream.push(payload)) return;
        if (!pending.behind.has(stream)) {
          pending.behind.add(stream);
          if (pending.behind.size === 1) this.#flow(T.PAUSE, id);
        }
        if (stream.readableLength > MAX_BUFFERED_WHILE_PAUSED && !this.#blocked.has(stream)) {
          this.#blocked.add(stream);
          this.#socket.pause();
        }
        return;
      }
      case T.EXIT: {
        if (!pending.started || payload.length !== 8) throw bad('EXIT before STARTED, or malformed');
        this.#commands.delete(id);
        const kind = payload.readUInt32LE(0);
        const value = payload.readUInt32LE(4);
        if (kind > 1) throw bad(`EXIT of kind ${kind}`);
        pending.stdout.push(null);
        pending.stderr.push(null);
        pending.resolveDone(
          kind === 0 ? { kind: 'exited', code: value } : { kind: 'signaled', signal: value },
        );
        return;
      }
      default:
        throw bad(`unknown frame type ${type}`);
    }
  }

  #fail(err: Error): void {
    if (this.#failure) return;
    this.#failure = err;
    this.#socket.destroy();
    this.#blocked.clear();
    for (const pending of this.#commands.values()) {
      pending.rejectPid(err);
      // End (not destroy with an error: nobody may be listening for 'error'); `done` carries the reason.
      pending.stdout.push(null);
      pending.stderr.push(null);
      pending.rejectDone(err);
    }
    this.#commands.clear();
    for (const ping of this.#pings.values()) ping.reject(err);
    this.#pings.clear();
    this.#resolveClosed(err);
  }
}

function bad(what: string): ProtocolError {
  return new ProtocolError(`af-init broke the protocol (${what}); the connection is closed`);
}
