// Where the CLI writes: injectable so commands can be tested in-process, and one place for --json.
import { escapeJsonText } from '@agentfense/protocol/core';
import type { ControlPlane } from '../control-plane.js';
import type { SpareSandbox } from '../sandboxes/spare.js';

/** The CLI's output channels. */
export interface CliIo {
  readonly stdout: { write(chunk: string | Uint8Array): unknown };
  readonly stderr: { write(chunk: string | Uint8Array): unknown };
}

/** What a command run can report back besides its output: the exit status to use (e.g. `run` passes the
 * sandboxed command's status through). */
export interface CliResult {
  exitCode: number;
}

/** How the CLI runs: as the `agentfense` executable, or in-process (tests, embedding). */
export interface CliMode {
  /**
   * The executable (bin/agentfense.js), which exits when the command is done: `run` may then leave its
   * sandbox's teardown to a detached reaper and exit at once. In-process callers keep the synchronous
   * teardown (their process lives on).
   */
  readonly detachedCleanup?: boolean;
  /**
   * Set by `run` when it left its one-shot sandbox to the background reaper (watchdog.ts): the process
   * must exit now (process.exit), without waiting for the worker, mounts and cgroups it did not tear down.
   */
  exitNow?: boolean;
  /** Set by the run helper (run-helper/server.ts): `run` serves a client's request in the helper. */
  readonly helper?: HelperRun;
}

/** How SIGINT/SIGTERM/SIGHUP reach a `run`: its own process's signals, or the run helper's client's. */
export interface Interrupt {
  /** Aborted by the first signal. */
  readonly signal: AbortSignal;
  /** The first signal's name, once one came. */
  readonly received: string | undefined;
  dispose(): void;
}

/** What the run helper gives the `run` it serves in place of this process's own. */
export interface HelperRun {
  /** The helper's open control plane (not closed by the run). */
  readonly plane: ControlPlane;
  /** The client's working directory (relative DIR and --rules paths). */
  readonly cwd: string;
  /** The client's standard input (--stdin), whole. */
  readonly stdin: () => Promise<Buffer>;
  /** The client's signals (and its connection dropping). */
  readonly interrupt: Interrupt;
  /** performance.now() of this process that stands for the client's node start (`-v`'s first step). */
  readonly originMs: number;
  /**
   * A finished one-shot sandbox is retired (SandboxManager.retire): the answer goes out once its record
   * is gone, and the helper waits for `removed` (its processes, mounts, files) before it exits.
   */
  readonly retiring: (removed: Promise<void>) => void;
  /** A started sandbox kept for the next identical request (sandboxes/spare.ts), when switched on. */
  readonly spare?: SpareSandbox;
}

/** What every command registration receives. */
export interface CliContext {
  readonly io: CliIo;
  readonly result: CliResult;
  readonly mode: CliMode;
}

/** Process stdio. */
export const processIo: CliIo = { stdout: process.stdout, stderr: process.stderr };

/** True when `stream` is a terminal (a person reads it), false for files, pipes and test buffers. */
export function isTerminal(stream: CliIo['stdout']): boolean {
  return (stream as { isTTY?: boolean }).isTTY === true;
}

/** Writes `value` as pretty JSON followed by a newline. */
export function printJson(io: CliIo, value: unknown): void {
  io.stdout.write(`${escapeJsonText(JSON.stringify(value, null, 2))}\n`);
}

/** Formats rows as left-aligned columns separated by two spaces. */
export function formatTable(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows
    .map((row) =>
      row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  '),
    )
    .join('\n');
}
