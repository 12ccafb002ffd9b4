// The client side of the run helper, run by the executable's prelude before the CLI loads: when the data
// directory has a live helper, `agentfense run` hands it the command line and relays what comes back
// (output, status), so this process costs one node start-up and a few kilobytes of code. Anything short
// of the helper accepting the request (no socket, a refused connection, a socket or listener that is not
// this user's, a DECLINE, the connection closed before ACCEPT) returns undefined and the run happens
// in-process, exactly as without a helper: nothing was done for it yet. With `-v` the reason is printed.
import { lstatSync, statSync } from 'node:fs';
import type { Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { resolveDataDir } from '../../paths.js';
import { flagValue, parseRunLine } from '../run-line.js';
import { peerOf } from './peercred.js';
import {
  FRAME,
  RUN_HELPER_ENV,
  dataFrames,
  frame,
  connectUnix,
  frameReader,
  helperSocketPath,
  processTraits,
  relevantEnv,
} from './protocol.js';
import type { HelperRequest, ProcessTraits } from './protocol.js';

/** The signals `run` answers by stopping the command (run.ts): forwarded to the helper. */
const INTERRUPTS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * A request only the in-process path serves identically (Docker keeps its synchronous teardown there).
 * Secrets too: their values are read by the process the operator started, and never kept for a spare.
 */
function helperCanServe(options: readonly string[]): boolean {
  const runtime = flagValue(options, '--runtime');
  const secrets = options.some((o) => /^--secret(-file)?(=|$)/.test(o));
  return (
    (runtime === undefined || runtime === 'bwrap') && flagValue(options, '--image') === undefined && !secrets
  );
}

/**
 * Why `socket` is not one this user's helper made, if it is not: a socket, ours, 0600, in a data directory
 * of ours that nobody else may write (else someone else could have put it there, and would get our argv,
 * environment and stdin, and write to our terminal). Undefined when it is; 'absent' when there is none
 * (the usual first run: not worth a word). May throw (EACCES, ENOTDIR).
 */
function untrusted(dataDir: string, socket: string): string | undefined {
  const uid = process.getuid?.();
  const sock = lstatSync(socket, { throwIfNoEntry: false });
  if (sock === undefined) return 'absent';
  if (!sock.isSocket()) return `${socket} is not a socket`;
  if (sock.uid !== uid) return `${socket} belongs to uid ${sock.uid}, not to this user (uid ${uid})`;
  if ((sock.mode & 0o077) !== 0) return `${socket} is accessible to others (mode ${modeOf(sock.mode)})`;
  const dir = statSync(dataDir);
  if (dir.uid !== uid) return `the data directory belongs to uid ${dir.uid}, not to this user (uid ${uid})`;
  if ((dir.mode & 0o022) !== 0)
    return `the data directory is writable by others (mode ${modeOf(dir.mode)}): anyone could replace the socket`;
  return undefined;
}

/**
 * Why the process listening at the other end of `socket` is not this user's helper, if it is not. The
 * path checks above say who made the socket file, not who listens on it: a listener of another uid can
 * sit behind a file of ours (a socket renamed or bind-mounted into place). The kernel's SO_PEERCRED names
 * the process that called listen(). The helper is always this user's: the first in-process run of this
 * user starts it, without changing uid, and it serves only its own uid (server.ts); so root is no
 * exception here.
 */
function foreignListener(socket: Socket): string | undefined {
  let peer: { uid: number; pid: number };
  try {
    peer = peerOf(socket);
  } catch (err) {
    return `its listener's credentials could not be read (${err instanceof Error ? err.message : String(err)})`;
  }
  const uid = process.getuid?.();
  if (peer.uid === uid) return undefined;
  return `the process listening on its socket runs as uid ${peer.uid} (pid ${peer.pid}), not as this user (uid ${uid})`;
}

function modeOf(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

/** With `-v`: says why the helper was not used (the in-process run's steps follow). */
function explain(verbose: boolean, reason: string): void {
  if (verbose) process.stderr.write(`agentfense: run helper not used: ${reason}; running in-process\n`);
}

/**
 * Runs `argv` (without node and script) through the data directory's run helper; resolves with the exit
 * status, or undefined when the caller must run it in-process (not a run, the helper is off or absent,
 * or it declined).
 */
export async function runThroughHelper(argv: readonly string[]): Promise<number | undefined> {
  if (process.env[RUN_HELPER_ENV] === '0') return undefined;
  const line = parseRunLine(argv);
  if (line === undefined || !helperCanServe(line.options)) return undefined;
  let dataDir: string;
  try {
    dataDir = resolveDataDir({ dataDir: line.data });
  } catch {
    return undefined; // a bad --data value: the in-process run reports it
  }
  const path = helperSocketPath(dataDir);
  const verbose = line.options.includes('-v') || line.options.includes('--verbose');
  let cwd: string;
  let traits: ProcessTraits;
  try {
    // Both throw for what the in-process run reports itself: a deleted cwd (ENOENT), a data directory
    // this user may not search (EACCES), a file in its place (ENOTDIR).
    const distrust = untrusted(dataDir, path);
    if (distrust !== undefined) {
      if (distrust !== 'absent') explain(verbose, distrust);
      return undefined;
    }
    cwd = process.cwd();
    traits = processTraits();
  } catch {
    return undefined;
  }
  let socket: Socket;
  try {
    socket = await connectUnix(path);
  } catch {
    return undefined; // a helper that just exited (or died): its successor is the in-process run's
  }
  // Before a byte is sent: the request carries argv, environment and then stdin.
  const foreign = foreignListener(socket);
  if (foreign !== undefined) {
    socket.destroy();
    explain(verbose, foreign);
    return undefined;
  }
  const request: HelperRequest = {
    argv,
    cwd,
    dataDir,
    env: relevantEnv(process.env),
    clientMs: performance.now(),
    stdoutIsTTY: process.stdout.isTTY === true,
    stderrIsTTY: process.stderr.isTTY === true,
    traits,
  };
  return converse(socket, request, { forwardStdin: line.options.includes('--stdin'), verbose });
}

function converse(
  socket: Socket,
  request: HelperRequest,
  { forwardStdin, verbose }: { forwardStdin: boolean; verbose: boolean },
): Promise<number | undefined> {
  return new Promise((resolve) => {
    let accepted = false;
    let settled = false;
    let signals = 0;
    const onSignal = (name: NodeJS.Signals): void => {
      // As in-process: the first stops the command, the second is ignored while the helper cleans up,
      // the third exits at once (the helper still removes the sandbox: the connection dropped).
      signals++;
      if (signals >= 3) process.exit(128 + (osConstants.signals[name] ?? 0));
      socket.write(frame(FRAME.signal, name));
    };
    const finish = (status: number | undefined): void => {
      if (settled) return;
      settled = true;
      for (const name of INTERRUPTS) process.off(name, onSignal);
      socket.destroy();
      if (forwardStdin) process.stdin.destroy();
      resolve(status);
    };
    const draining = new Set<NodeJS.WriteStream>();
    const relay = (stream: NodeJS.WriteStream, payload: Buffer): void => {
      // Backpressure: a slow reader of our stdout slows the helper's reading of the command's output.
      // Frames already read meanwhile are still written (the stream buffers them): one wait per stream,
      // not one 'drain' listener per frame. A reader that went away (EPIPE: the stream closes) ends it.
      if (stream.write(payload) || draining.has(stream) || stream.destroyed) return;
      draining.add(stream);
      socket.pause();
      const go = (): void => {
        stream.off('drain', go);
        stream.off('close', go);
        draining.delete(stream);
        if (draining.size === 0) socket.resume();
      };
      stream.on('drain', go);
      stream.on('close', go);
    };
    const read = frameReader((type, payload) => {
      switch (type) {
        case FRAME.accept:
          accepted = true;
          for (const name of INTERRUPTS) process.on(name, onSignal);
          if (forwardStdin) sendStdin(socket);
          return;
        case FRAME.decline:
          explain(verbose, `the run helper declined: ${payload.toString('utf8')}`);
          finish(undefined);
          return;
        case FRAME.stdout:
          relay(process.stdout, payload);
          return;
        case FRAME.stderr:
          relay(process.stderr, payload);
          return;
        case FRAME.exit:
          finish(payload.readUInt32LE(0));
          return;
        default:
          throw new Error(`unexpected run-helper frame type ${type}`);
      }
    });
    const broken = (): void => {
      if (settled) return;
      if (!accepted) {
        finish(undefined); // nothing was done: run in-process
        return;
      }
      process.stderr.write(
        "agentfense: the run helper ended before the command's status came back (see the data directory's logs/control.log)\n",
      );
      finish(1);
    };
    socket.on('data', (chunk: Buffer) => {
      try {
        read(chunk);
      } catch {
        broken();
      }
    });
    socket.on('error', broken);
    socket.on('close', broken);
    socket.write(frame(FRAME.request, JSON.stringify(request)));
  });
}

function sendStdin(socket: Socket): void {
  process.stdin.on('data', (chunk: Buffer) => {
    // Split to keep frames small; the helper collects them (run reads all of stdin before it starts).
    for (const part of dataFrames(FRAME.stdin, chunk)) socket.write(part);
  });
  process.stdin.once('end', () => socket.write(frame(FRAME.stdin)));
  process.stdin.once('error', () => socket.write(frame(FRAME.stdin)));
}
