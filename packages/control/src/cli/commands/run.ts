// `agentfense run <dir> [options] -- <cmd…>`: one command in a fresh sandbox over <dir> (linked in place,
// nothing copied), with its output streamed live and its exit status passed through (contract §7).
// Afterwards --diff prints the change set, --commit applies it to <dir>; the sandbox is destroyed unless
// --keep (then `agentfense logs|audit|sandbox inspect <id>` work on it later).
import type { NetworkPolicyInput } from '@agentfense/network';
import { constants as osConstants } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import type { Command } from 'commander';
import {
  CancelledError,
  InvalidArgumentError,
  changeLine,
  escapeControls,
  quotePath,
} from '@agentfense/protocol/core';
import type { ChangeEntry, CommitResult, ExecResult } from '@agentfense/protocol';
import type { ControlPlane } from '../../control-plane.js';
import { resolveDataDir } from '../../paths.js';
import { addDataOption, openControlPlane } from '../control-options.js';
import type { DataFlags } from '../control-options.js';
import { isTerminal, printJson } from '../io.js';
import { terminalWriter } from '../terminal-filter.js';
import type { CliContext, CliIo, Interrupt } from '../io.js';
import { ONE_SHOT_LABEL } from '../../sandboxes/one-shot.js';
import type { CreateSandboxOptions } from '../../sandboxes/types.js';
import type { SpareSandbox } from '../../sandboxes/spare.js';
import { EXIT_CONFLICT, reportCommit } from '../commit-report.js';
import { MAX_STDIN_BYTES, stdinTooLarge } from '../stdin-limit.js';
import { armWatchdog } from '../watchdog.js';
import type { Watchdog } from '../watchdog.js';
import { parseEnvPairs, parseLabels, parseSeconds } from '../parse.js';
import { addNetworkOptions, networkFromFlags } from '../network-options.js';
import { addSecretOptions, secretsFromFlags } from '../secret-options.js';
import type { SecretFlags } from '../secret-options.js';
import type { SecretSource } from '../../secret-sources.js';
import type { NetworkFlags } from '../network-options.js';
import { addPolicyOptions, policyFromFlags } from '../policy-options.js';
import type { PolicyFlags } from '../policy-options.js';
import { addResourceOptions, resourcesFromFlags } from '../resource-options.js';
import type { ResourceFlags } from '../resource-options.js';

/** Status when the command was killed by --timeout (as timeout(1) does). */
export const EXIT_TIMEOUT = 124;

interface RunFlags extends PolicyFlags, DataFlags, ResourceFlags, NetworkFlags, SecretFlags {
  readonly runtime?: string;
  readonly image?: string;
  readonly timeout?: string;
  readonly env: string[];
  readonly label: string[];
  readonly cwd?: string;
  readonly stdin?: boolean;
  readonly diff?: boolean;
  readonly commit?: boolean;
  readonly lastWriterWins?: boolean;
  readonly keep?: boolean;
  readonly json?: boolean;
  readonly verbose?: boolean;
  readonly rawOutput?: boolean;
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).length;
    if (size > MAX_STDIN_BYTES) throw stdinTooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/**
 * This process's working directory, for relative DIR and --rules paths. A directory removed under us
 * (ENOENT) matters only when one of them is relative: then a clear error; else '/' (nothing resolves
 * against it).
 */
function workingDirectory(paths: readonly (string | undefined)[]): string {
  try {
    return process.cwd();
  } catch (err) {
    if (paths.every((path) => path === undefined || isAbsolute(path))) return '/';
    throw new InvalidArgumentError(
      `the current directory can not be read (${(err as NodeJS.ErrnoException).code ?? String(err)}: removed?); give DIR and --rules as absolute paths, or run from an existing directory`,
    );
  }
}

function summarize(changes: readonly ChangeEntry[]): string {
  if (changes.length === 0) return 'no changes\n';
  return changes.map((c) => `${changeLine(c)}\n`).join('');
}

function exitStatusOf(result: ExecResult): number {
  if (result.timedOut) return EXIT_TIMEOUT;
  if (result.exitCode !== null) return result.exitCode;
  return 128 + 9; // killed by a signal outside the sandbox (stop, cancel): report it like a shell does
}

/** Registers `run` on the program. */
export function registerRun(program: Command, { io, result, mode }: CliContext): void {
  addSecretOptions(
    addNetworkOptions(
      addResourceOptions(
        addDataOption(
          addPolicyOptions(
            program
              .command('run')
              .description("run one command in a fresh sandbox over <dir>; exits with the command's status")
              .argument('<dir>', 'the codebase directory, seen as /workspace (used in place, nothing copied)')
              .argument(
                '<command...>',
                'the command and its arguments (after --); use `sh -c "..."` for a shell line',
              )
              .usage('<dir> [options] -- <command...>'),
          ),
        ),
      ),
    ),
  )
    .option('--runtime <name>', 'bwrap (default) or docker')
    .option('--image <image>', 'container image (docker runtime; default agentfense/base:latest)')
    .option('--timeout <seconds>', 'kill the command and everything it started after this long (status 124)')
    .option('--env <K=V>', 'environment variable for the command (repeatable)', collect, [])
    .option('--label <k=v>', 'label stored on the sandbox (repeatable)', collect, [])
    .option('--cwd <dir>', 'working directory inside the sandbox (default /workspace)')
    .option('--stdin', "pass this process's standard input to the command (default: empty stdin)")
    .option('--diff', 'after the command, print the change set and a unified diff of text files')
    .option('--commit', 'after the command, apply the changes to <dir> (conflicts are reported, status 3)')
    .option(
      '--last-writer-wins',
      'with --commit: overwrite files changed in <dir> meanwhile instead of reporting them',
    )
    .option('--keep', 'keep the sandbox (stopped, with its changes, logs and audit trail) and print its id')
    .option('--json', 'print one JSON object: exit status, output, changes, diff, commit result')
    .option('-v, --verbose', 'print each step with its duration on stderr')
    .option(
      '--raw-output',
      "on a terminal, pass the command's escape sequences as they are (default: colours only)",
    )
    .action(async (dir: string, command: string[], flags: RunFlags) => {
      // In the run helper (run-helper/server.ts) the request is another process's: its cwd, stdin and
      // signals, and the helper's open control plane. Everything else below is the same on both paths.
      const { helper } = mode;
      const cwd = helper?.cwd ?? workingDirectory([dir, flags.rules]);
      const rules = await policyFromFlags(flags, { cwd });
      const network = await networkFromFlags(flags, { cwd });
      const secrets = await secretsFromFlags(flags, { cwd });
      const env = parseEnvPairs(flags.env);
      const labels = parseLabels(flags.label);
      const timeoutMs =
        flags.timeout === undefined ? undefined : parseSeconds(flags.timeout, '--timeout') * 1000;
      if (flags.lastWriterWins === true && flags.commit !== true) {
        throw new InvalidArgumentError('--last-writer-wins only makes sense with --commit');
      }
      const stdin = flags.stdin === true ? await (helper?.stdin ?? readStdin)() : undefined;
      const step = stepper(io, flags.verbose === true, helper?.originMs ?? 0);
      step(
        helper === undefined
          ? 'CLI loaded (since node started)'
          : 'handed to the run helper (since node started)',
      );

      // Whatever ends this process from here on (SIGKILL included), the watchdog makes sure the sandbox's
      // processes die and, for a one-shot sandbox, that it is removed (watchdog.ts).
      const watchdog =
        mode.detachedCleanup === true
          ? armWatchdog({ dataDir: resolveDataDir({ dataDir: flags.data }) })
          : undefined;
      // The executable removes a one-shot bwrap sandbox in the background of its exit (the watchdog's
      // reaper): unmount, cgroups and the delta's removal are not waited for. Docker keeps the synchronous
      // teardown (its container removal is the engine's, and slower to recover).
      const detach = watchdog !== undefined && flags.keep !== true && (flags.runtime ?? 'bwrap') === 'bwrap';

      // From here on SIGINT, SIGTERM and SIGHUP stop the command and remove the sandbox (stop it with
      // --keep) before we exit 128+N, like a shell: nothing is left running or mounted.
      const interrupt = helper?.interrupt ?? interruptOnSignals();
      let outcome: RunOutcome | undefined;
      let plane: ControlPlane | undefined;
      try {
        // One sandbox, started at once: its worker spawns and the runtime checks the host while the
        // data directory opens and the sandbox is created; no idle worker is kept for later.
        if (helper === undefined) {
          plane = await openControlPlane(flags, { workerPoolSize: 0, prewarm: flags.runtime ?? 'bwrap' });
          step('data directory open (recovered)');
        }
        outcome = await runInSandbox(helper?.plane ?? (plane as ControlPlane), {
          dir: resolve(cwd, dir),
          rules,
          network,
          secrets,
          command,
          env,
          labels,
          flags,
          step,
          io,
          abort: interrupt.signal,
          detach,
          ...(helper === undefined ? {} : { retiring: helper.retiring }),
          ...(helper?.spare === undefined ? {} : { spare: helper.spare }),
          ...(watchdog === undefined ? {} : { watchdog }),
          ...(timeoutMs === undefined ? {} : { timeoutMs }),
          ...(stdin === undefined ? {} : { stdin }),
        });
      } catch (err) {
        if (interrupt.received === undefined) throw err;
      } finally {
        interrupt.dispose();
        if (outcome?.detached !== true) {
          await plane?.close();
          watchdog?.disarm();
        }
      }
      if (interrupt.received !== undefined) {
        io.stderr.write(
          `agentfense: ${interrupt.received}: the command was stopped and the sandbox ${flags.keep === true ? 'stopped' : 'removed'}\n`,
        );
        result.exitCode = 128 + (osConstants.signals[interrupt.received as NodeJS.Signals] ?? 0);
        return;
      }
      if (outcome === undefined) throw new Error('unreachable: run ended without an outcome');
      // The first in-process run of a data directory leaves a helper for the next ones (after its own
      // work, so it delays nothing of this run; run-helper/spawn.ts).
      if (helper === undefined && mode.detachedCleanup === true && (flags.runtime ?? 'bwrap') === 'bwrap') {
        const { startRunHelper } = await import('../run-helper/spawn.js');
        await startRunHelper(resolveDataDir({ dataDir: flags.data }));
      }
      const { exec, changes, diff, commit, sandboxId } = outcome;
      if (flags.json === true) {
        printJson(io, {
          sandboxId: flags.keep === true || outcome.unfinished !== undefined ? sandboxId : null,
          exitCode: exec.exitCode,
          signal: exec.signal,
          timedOut: exec.timedOut,
          oomKilled: exec.oomKilled,
          durationMs: Math.round(exec.durationMs),
          stdout: exec.stdout.toString('utf8'),
          stderr: exec.stderr.toString('utf8'),
          changes,
          diff: diff ?? null,
          commit: commit ?? null,
        });
      }
      if (exec.timedOut)
        io.stderr.write(`agentfense: the command timed out after ${flags.timeout} s and was killed\n`);
      if (exec.oomKilled)
        io.stderr.write('agentfense: the command was killed for exceeding its memory limit\n');
      const status = exitStatusOf(exec);
      result.exitCode =
        outcome.unfinished !== undefined
          ? 1
          : status === 0 && commit !== undefined && commit.conflicts.length > 0
            ? EXIT_CONFLICT
            : status;
      if (outcome.detached) mode.exitNow = true;
    });
}

interface RunRequest {
  readonly dir: string;
  readonly rules: readonly unknown[];
  readonly network: NetworkPolicyInput | undefined;
  readonly command: readonly string[];
  readonly env: Record<string, string>;
  readonly labels: Record<string, string>;
  readonly flags: RunFlags;
  /** Never part of a spare's options: a run with secrets runs in-process (run-helper/client.ts). */
  readonly secrets: readonly SecretSource[];
  readonly timeoutMs?: number;
  readonly stdin?: Buffer;
  readonly step: (what: string) => void;
  readonly io: CliIo;
  /** Aborted by SIGINT/SIGTERM/SIGHUP: the command is killed and the sandbox removed. */
  readonly abort: AbortSignal;
  /** Leave a one-shot sandbox that ran its command to the watchdog's reaper instead of destroying it. */
  readonly detach: boolean;
  /** In the run helper: retire a one-shot sandbox that ran its command (record first, teardown after). */
  readonly retiring?: (removed: Promise<void>) => void;
  /** In the run helper, when switched on: take a started sandbox made for these exact options. */
  readonly spare?: SpareSandbox;
  readonly watchdog?: Watchdog;
}

interface RunOutcome {
  readonly sandboxId: string;
  readonly exec: ExecResult;
  readonly changes: readonly ChangeEntry[];
  readonly diff?: { diff: string; binary: readonly string[] };
  readonly commit?: CommitResult;
  /** Why the commit did not run to its end (the sandbox is kept, stopped, with the rest of it). */
  readonly unfinished?: string;
  /** The sandbox is still there, RUNNING, for the reaper to remove once this process has exited. */
  readonly detached: boolean;
}

/** The options `run` creates its sandbox with (all but the codebase). */
function sandboxOptions(request: RunRequest): Omit<CreateSandboxOptions, 'codebaseId'> {
  const { flags } = request;
  return {
    rules: request.rules,
    ...(request.network === undefined ? {} : { network: request.network }),
    ...(request.secrets.length === 0 ? {} : { secrets: request.secrets }),
    resources: resourcesFromFlags(flags),
    // Marks a sandbox nobody will ask for again: if this process dies before removing it, recovery and
    // `agentfense gc` remove it (a --keep sandbox is the user's and stays).
    labels: flags.keep === true ? request.labels : { ...request.labels, [ONE_SHOT_LABEL]: 'true' },
    ...(flags.runtime === undefined ? {} : { runtime: flags.runtime }),
    ...(flags.image === undefined ? {} : { image: flags.image }),
  };
}

async function runInSandbox(plane: ControlPlane, request: RunRequest): Promise<RunOutcome> {
  const { flags, io, step } = request;
  const json = flags.json === true;
  const { abort } = request;
  const options = sandboxOptions(request);
  const spare = flags.keep === true ? undefined : request.spare;
  const taken = await spare?.take({ dir: request.dir, options });
  const codebase =
    taken === undefined ? await plane.linkCodebase({ path: request.dir }) : { id: taken.codebaseId };
  step(taken === undefined ? 'codebase linked' : `took started sandbox ${taken.sandboxId}`);
  request.watchdog?.made('codebase', codebase.id);
  let sandboxId: string | undefined = taken?.sandboxId;
  let detached = false;
  let retire = false;
  /** Why the commit did not run to its end, when it did not: the sandbox is then kept. */
  let unfinished: string | undefined;
  try {
    abort.throwIfAborted();
    if (sandboxId === undefined) {
      // Owned from creation: if this process dies before starting it, recovery settles it.
      const sandbox = await plane.sandboxes.create({ ...options, codebaseId: codebase.id }, { own: true });
      sandboxId = sandbox.id;
      step(`created ${sandbox.id}`);
      abort.throwIfAborted();
      await plane.startSandbox(sandbox.id);
      step('started (worker mounted, runtime ready)');
    }
    const sandbox = { id: sandboxId };
    abort.throwIfAborted();
    // The command's bytes on a terminal: colours pass, other escape sequences are shown, not obeyed.
    const raw = flags.rawOutput === true;
    const stdout = terminalWriter(io.stdout, isTerminal(io.stdout) && !raw);
    const stderr = terminalWriter(io.stderr, isTerminal(io.stderr) && !raw);
    const exec = await plane.run(sandbox.id, request.command, {
      encoding: 'buffer',
      env: request.env,
      signal: abort,
      ...(flags.cwd === undefined ? {} : { cwd: flags.cwd }),
      ...(request.timeoutMs === undefined ? {} : { timeoutMs: request.timeoutMs }),
      ...(request.stdin === undefined ? {} : { stdin: request.stdin }),
      // Live output, except with --json where everything goes into one object at the end.
      ...(json
        ? {}
        : {
            onStdout: (chunk: Buffer) => stdout.write(chunk),
            onStderr: (chunk: Buffer) => stderr.write(chunk),
          }),
    });
    stdout.end();
    stderr.end();
    step(`command finished (status ${exec.exitCode ?? exec.signal})`);
    abort.throwIfAborted();
    const changes = await plane.changes(sandbox.id);
    let diff: { diff: string; binary: readonly string[] } | undefined;
    if (flags.diff === true) {
      diff = await plane.diff(sandbox.id);
      if (!json) {
        io.stderr.write(`agentfense: changes in the sandbox:\n${summarize(changes)}`);
        // File contents are the agent's: on a terminal their control characters are shown, not obeyed.
        io.stdout.write(isTerminal(io.stdout) ? escapeControls(diff.diff) : diff.diff);
        for (const path of diff.binary) io.stdout.write(`Binary file ${quotePath(path)} differs\n`);
      }
    }
    let commit: CommitResult | undefined;
    if (flags.commit === true) {
      try {
        commit = await plane.commit(sandbox.id, {
          mode: flags.lastWriterWins === true ? 'last-writer-wins' : 'detect-conflicts',
        });
      } catch (err) {
        unfinished = `its commit failed (${err instanceof Error ? err.message : String(err)})`;
        throw err;
      }
      if (commit.interrupted !== undefined) unfinished = `its commit stopped early (${commit.interrupted})`;
      if (!json) reportCommit(io, commit, request.dir);
    }
    if (flags.keep === true) {
      await plane.stopSandbox(sandbox.id, { reason: 'agentfense run --keep' });
      if (!json)
        io.stderr.write(`agentfense: kept sandbox ${sandbox.id} (stopped; changes, logs and audit kept)\n`);
    }
    // Everything the user asked for is done: the rest is teardown, which the reaper can do after exit.
    const done = flags.keep !== true && !abort.aborted && unfinished === undefined;
    detached = request.detach && done;
    retire = request.retiring !== undefined && done;
    return {
      sandboxId: sandbox.id,
      exec,
      changes,
      ...(diff && { diff }),
      ...(commit && { commit }),
      ...(unfinished === undefined ? {} : { unfinished }),
      detached,
    };
  } finally {
    if (unfinished !== undefined && sandboxId !== undefined) {
      // Part of the commit is in <dir>, the rest only in the delta: the sandbox is the user's now.
      const { finishOrDiscard } = await import('../../sandboxes/pending-commit.js');
      await plane.sandboxes.keepForUser(sandboxId, `${unfinished}; ${finishOrDiscard(sandboxId)}`);
      io.stderr.write(
        `agentfense: ${unfinished}: sandbox ${sandboxId} kept (stopped); ${finishOrDiscard(sandboxId)}\n`,
      );
    } else if (detached && sandboxId !== undefined) {
      // Loaded here: SQLite is the control plane's (already open), not something --help should load.
      const { forgetOneShot } = await import('../forget-one-shot.js');
      forgetOneShot(plane.layout, { sandboxId, codebaseId: codebase.id });
      step('sandbox forgotten (its mounts and files are removed in the background)');
    } else if (retire && sandboxId !== undefined) {
      const { forgotten, removed } = plane.sandboxes.retire(sandboxId);
      request.retiring?.(removed);
      await forgotten;
      await plane.deleteCodebase(codebase.id);
      step('sandbox forgotten (the helper removes it after answering)');
      // The next identical request takes a sandbox started meanwhile (after this one's answer).
      spare?.prepare({ dir: request.dir, options });
    } else if (flags.keep === true) {
      if (abort.aborted && sandboxId !== undefined) {
        await plane.stopSandbox(sandboxId, { reason: 'agentfense run --keep interrupted' });
      }
    } else {
      if (sandboxId !== undefined) await plane.destroySandbox(sandboxId);
      await plane.deleteCodebase(codebase.id);
      step('sandbox destroyed');
    }
  }
}

/** The signals `run` answers by cleaning up and exiting 128+N. */
const INTERRUPTS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Aborts `signal` on the first SIGINT/SIGTERM/SIGHUP and records which; a second one is ignored while the
 * clean-up runs, a third exits at once (whatever is left is cleaned by the next invocation's recovery).
 */
function interruptOnSignals(): Interrupt {
  const controller = new AbortController();
  let count = 0;
  const state = {
    signal: controller.signal,
    received: undefined as string | undefined,
    dispose: () => {
      for (const name of INTERRUPTS) process.off(name, onSignal);
    },
  };
  function onSignal(name: NodeJS.Signals): void {
    count++;
    if (count === 1) {
      state.received = name;
      controller.abort(new CancelledError(`interrupted by ${name}`));
    } else if (count >= 3) {
      process.exit(128 + (osConstants.signals[name] ?? 0));
    }
  }
  for (const name of INTERRUPTS) process.on(name, onSignal);
  return state;
}

/** `--verbose` progress: each step with the time since the previous one. */
function stepper(io: CliIo, verbose: boolean, origin: number): (what: string) => void {
  // The first step counts from node's own start (performance's time origin, or where the run helper puts
  // its client's): node and loading the CLI.
  let last = origin;
  return (what) => {
    if (!verbose) return;
    const now = performance.now();
    io.stderr.write(`agentfense: ${what} (+${Math.round(now - last)} ms)\n`);
    last = now;
  };
}
