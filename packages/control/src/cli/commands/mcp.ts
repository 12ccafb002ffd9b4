// `agentfense mcp <dir>`: an MCP server on stdio giving an agent a fenced shell over <dir>.
// The MCP SDK is loaded only when this command runs, so other commands do not pay for it.
import { resolve } from 'node:path';
import { stat } from 'node:fs/promises';
import type { Command } from 'commander';
import { InvalidArgumentError } from '@agentfense/protocol/core';
import { addDataOption } from '../control-options.js';
import type { DataFlags } from '../control-options.js';
import type { CliContext } from '../io.js';
import { addNetworkOptions, networkFromFlags } from '../network-options.js';
import { addSecretOptions, secretsFromFlags } from '../secret-options.js';
import type { SecretFlags } from '../secret-options.js';
import type { NetworkFlags } from '../network-options.js';
import { addPolicyOptions, policyFromFlags } from '../policy-options.js';
import type { PolicyFlags } from '../policy-options.js';
import { untilSignal } from '../signals.js';

interface McpFlags extends PolicyFlags, DataFlags, NetworkFlags, SecretFlags {
  readonly runtime?: string;
  readonly image?: string;
  readonly allowCommit?: boolean;
  readonly keep?: boolean;
}

/** Registers `mcp` on the program. */
export function registerMcp(program: Command, { io, result }: CliContext): void {
  addSecretOptions(
    addNetworkOptions(
      addDataOption(
        addPolicyOptions(
          program
            .command('mcp')
            .description(
              'serve an MCP server on stdio with one sandbox over <dir> (tools: run, shell, read_file, write_file, list_files, explain, changes)',
            )
            .argument('<dir>', 'the codebase directory, seen as /workspace (used in place, nothing copied)'),
        ),
      ),
    ),
  )
    .option('--runtime <name>', 'bwrap (default) or docker')
    .option('--image <image>', 'container image (docker runtime; default agentfense/base:latest)')
    .option('--allow-commit', 'offer the commit and discard tools (changes can reach <dir>)')
    .option('--keep', 'at exit keep the sandbox (stopped, with its changes, logs and audit) and print its id')
    .action(async (dir: string, flags: McpFlags) => {
      const rules = await policyFromFlags(flags);
      const network = await networkFromFlags(flags);
      const secrets = await secretsFromFlags(flags, { cwd: process.cwd() });
      const path = resolve(dir);
      const info = await stat(path).catch(() => null);
      if (info === null || !info.isDirectory()) {
        throw new InvalidArgumentError(`${path} is not a directory: give the codebase directory to serve`);
      }
      const signal = untilSignal();
      try {
        const { serveMcpStdio } = await import('../../mcp/stdio.js');
        const reason = await serveMcpStdio({
          dir: path,
          rules,
          allowCommit: flags.allowCommit === true,
          keep: flags.keep === true,
          stopSignal: signal.promise,
          stderr: io.stderr,
          ...(flags.runtime === undefined ? {} : { runtime: flags.runtime }),
          ...(flags.image === undefined ? {} : { image: flags.image }),
          ...(network === undefined ? {} : { network }),
          secrets,
          ...(flags.data === undefined ? {} : { dataDir: flags.data }),
        });
        io.stderr.write(`agentfense: MCP server stopped (${reason})\n`);
      } finally {
        signal.dispose();
      }
      result.exitCode = 0;
    });
}
