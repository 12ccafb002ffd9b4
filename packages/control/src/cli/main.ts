// The `agentfense` command line: builds the commander program and maps errors to exit statuses once.
import { Command, CommanderError } from 'commander';
import { AgentFenseError, InvalidArgumentError } from '@agentfense/protocol/core';
import { noSpaceCode, noSpaceMessage } from '../disk/no-space.js';
import { registerCodebases } from './commands/codebases.js';
import { registerExplain } from './commands/explain.js';
import { registerGc } from './commands/gc.js';
import { registerLogs } from './commands/logs.js';
import { registerMcp } from './commands/mcp.js';
import { registerMount } from './commands/mount.js';
import { registerNode } from './commands/node.js';
import { registerPresets } from './commands/presets.js';
import { registerRun } from './commands/run.js';
import { registerSandboxes } from './commands/sandboxes.js';
import { registerServe } from './commands/serve.js';
import { registerSetup } from './commands/setup.js';
import { registerSessions } from './commands/sessions.js';
import { processIo } from './io.js';
import type { CliIo, CliMode, CliResult } from './io.js';

/** Exit status for usage errors and invalid input (like most Unix tools). */
export const EXIT_USAGE = 2;
/** Exit status for every other failure of agentfense itself (a sandboxed command's own status is passed through). */
export const EXIT_FAILURE = 1;

/** Each adds its commands to the program, in the order `--help` lists them. */
const REGISTRARS = [
  registerExplain,
  registerPresets,
  registerRun,
  registerMount,
  registerLogs,
  registerSandboxes,
  registerCodebases,
  registerServe,
  registerNode,
  registerSessions,
  registerSetup,
  registerMcp,
  registerGc,
];

/**
 * Builds the program; commands write to `io`. With `invoked` (the first argument of the command line),
 * registration stops once a command of that name exists: commander runs only that one, and describing all
 * the others (their options, arguments and help texts) was a measurable part of a one-shot `run`'s start.
 * Any other first argument (--help, help, a typo commander suggests a correction for) gets them all.
 */
export function createProgram(
  io: CliIo = processIo,
  result: CliResult = { exitCode: 0 },
  mode: CliMode = {},
  invoked?: string,
): Command {
  const program = new Command('agentfense')
    .description(
      'Run AI agents against a real codebase in a sandbox whose rules decide, per path, what they may see, read and change.',
    )
    .version('0.1.0')
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    })
    // Options after a subcommand belong to it (`presets show x --json` is show's --json).
    .enablePositionalOptions()
    .exitOverride();
  const context = { io, result, mode };
  const names = (command: Command): string[] => [command.name(), ...command.aliases()];
  for (const register of REGISTRARS) {
    register(program, context);
    if (invoked !== undefined && program.commands.some((c) => names(c).includes(invoked))) break;
  }
  for (const command of program.commands) command.exitOverride().configureOutput(program.configureOutput());
  return program;
}

/**
 * Runs the CLI with `argv` (without node and script) and returns the exit status; never calls
 * process.exit (when `mode.exitNow` is set afterwards, the executable must: see CliMode).
 */
export async function runCli(
  argv: readonly string[],
  io: CliIo = processIo,
  mode: CliMode = {},
): Promise<number> {
  const result: CliResult = { exitCode: 0 };
  const program = createProgram(io, result, mode, argv[0]);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return result.exitCode;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version "fail" with exit code 0; real usage errors were already printed by commander.
      return err.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    if (err instanceof AgentFenseError) {
      io.stderr.write(`agentfense: ${err.message}\n`);
      return err instanceof InvalidArgumentError ? EXIT_USAGE : EXIT_FAILURE;
    }
    // A full filesystem met outside the control plane's own operations: said as such, not as a bug.
    const reason = noSpaceCode(err);
    if (reason !== undefined) {
      io.stderr.write(`agentfense: ${noSpaceMessage({ operation: 'running this command', reason })}\n`);
      return EXIT_FAILURE;
    }
    io.stderr.write(
      `agentfense: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    return EXIT_FAILURE;
  }
}
