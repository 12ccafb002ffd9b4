// `agentfense sandbox list|inspect|network|secret|commit|discard|destroy` (and the checkpoint commands of
// checkpoints.ts): the sandboxes recorded in the data directory.
import type { Command } from 'commander';
import type { SandboxInfo, SandboxState } from '../../sandboxes/types.js';
import { SANDBOX_STATES } from '../../sandboxes/types.js';
import { InvalidArgumentError } from '@agentfense/protocol/core';
import { describeRule } from '@agentfense/network';
import { addDataOption, withControlPlane } from '../control-options.js';
import { addNetworkOptions, networkFromFlags } from '../network-options.js';
import type { NetworkFlags } from '../network-options.js';
import type { DataFlags } from '../control-options.js';
import { formatTable, printJson } from '../io.js';
import type { CliContext } from '../io.js';
import { EXIT_CONFLICT, reportCommit } from '../commit-report.js';
import { parseLabels } from '../parse.js';
import { registerCheckpoints } from './checkpoints.js';
import { registerSecretCommand } from './secret.js';

interface ListFlags extends DataFlags {
  readonly codebase?: string;
  readonly state?: string;
  readonly label: string[];
  readonly json?: boolean;
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

function parseState(value: string | undefined): SandboxState | undefined {
  if (value === undefined) return undefined;
  const state = value.toUpperCase();
  if (!(SANDBOX_STATES as readonly string[]).includes(state)) {
    throw new InvalidArgumentError(
      `--state ${JSON.stringify(value)}: expected one of ${SANDBOX_STATES.join(', ')}`,
    );
  }
  return state as SandboxState;
}

function describe(sb: SandboxInfo): string {
  const rows: string[][] = [
    ['id', sb.id],
    ['state', sb.stateReason === null ? sb.state : `${sb.state} (${sb.stateReason})`],
    ['codebase', sb.codebaseId],
    ['runtime', sb.runtime],
    [
      'network',
      sb.networkPolicy.mode === 'none'
        ? 'none'
        : `${sb.networkPolicy.mode}; ${sb.networkPolicy.rules.map(describeRule).join('; ') || 'no rules'}`,
    ],
    ['secrets', sb.secrets.map((s) => `${s.name}@${s.hosts.join(',')} (${s.source})`).join('; ') || '-'],
    [
      'labels',
      Object.entries(sb.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(', ') || '-',
    ],
    ['created', sb.createdAt],
    ['started', sb.startedAt ?? '-'],
    ['stopped', sb.stoppedAt ?? '-'],
    ['expires', sb.expiresAt ?? 'never'],
    [
      'worker restarts',
      sb.lastRestartReason === null
        ? String(sb.restartCount)
        : `${sb.restartCount} (last: ${sb.lastRestartReason})`,
    ],
    ['rules', sb.rules.map((r) => `${r.pattern} -> ${r.permission}`).join('; ')],
  ];
  return `${formatTable(rows)}\n`;
}

/** Registers `sandbox` and its subcommands on the program. */
export function registerSandboxes(program: Command, context: CliContext): void {
  const { io, result } = context;
  const sandbox = program
    .command('sandbox')
    .description('list, inspect, commit, discard and destroy sandboxes');

  addDataOption(sandbox.command('list').description('list sandboxes (newest first)'))
    .option('--codebase <id>', 'only sandboxes of this codebase')
    .option('--state <state>', `only sandboxes in this state (${SANDBOX_STATES.join(', ')})`)
    .option('--label <k=v>', 'only sandboxes with this label (repeatable: all must match)', collect, [])
    .option('--json', 'print a JSON array')
    .action(async (flags: ListFlags) => {
      const state = parseState(flags.state);
      const labels = parseLabels(flags.label);
      await withControlPlane(flags, async (plane) => {
        const all: SandboxInfo[] = [];
        let pageToken: string | undefined;
        do {
          const page = await plane.listSandboxes({
            labels,
            ...(flags.codebase === undefined ? {} : { codebaseId: flags.codebase }),
            ...(state === undefined ? {} : { state }),
            ...(pageToken === undefined ? {} : { pageToken }),
          });
          all.push(...page.items);
          pageToken = page.nextPageToken ?? undefined;
        } while (pageToken !== undefined);
        if (flags.json === true) printJson(io, all);
        else if (all.length === 0) io.stderr.write('agentfense: no sandboxes\n');
        else
          io.stdout.write(
            `${formatTable([['ID', 'STATE', 'CODEBASE', 'RUNTIME', 'CREATED'], ...all.map((s) => [s.id, s.state, s.codebaseId, s.runtime, s.createdAt])])}\n`,
          );
      });
    });

  addDataOption(sandbox.command('inspect').description('show one sandbox').argument('<id>', 'sandbox id'))
    .option('--json', 'print the sandbox as JSON')
    .action(async (id: string, flags: DataFlags & { json?: boolean }) => {
      await withControlPlane(flags, async (plane) => {
        const info = await plane.getSandbox(id);
        if (flags.json === true) printJson(io, info);
        else io.stdout.write(describe(info));
      });
    });

  addNetworkOptions(
    addDataOption(
      sandbox
        .command('network')
        .description(
          "replace a sandbox's network policy; a running one closes the connections it no longer allows",
        )
        .argument('<id>', 'sandbox id'),
    ),
  ).action(async (id: string, flags: DataFlags & NetworkFlags) => {
    const policy = (await networkFromFlags(flags)) ?? { mode: 'none' as const };
    await withControlPlane(flags, async (plane) => {
      io.stdout.write(describe(await plane.setNetwork(id, policy)));
    });
  });

  registerSecretCommand(sandbox, context);

  addDataOption(
    sandbox
      .command('commit')
      .description(
        "apply a sandbox's changes to its codebase; first finishes a commit that did not finish (a killed `run --commit`)",
      )
      .argument('<id>', 'sandbox id'),
  )
    .option(
      '--last-writer-wins',
      'overwrite files changed in the codebase meanwhile instead of reporting them',
    )
    .option('--json', 'print the commit result as JSON')
    .action(async (id: string, flags: DataFlags & { lastWriterWins?: boolean; json?: boolean }) => {
      await withControlPlane(flags, async (plane) => {
        const commit = await plane.commit(id, {
          mode: flags.lastWriterWins === true ? 'last-writer-wins' : 'detect-conflicts',
        });
        if (flags.json === true) printJson(io, commit);
        else
          reportCommit(io, commit, (await plane.getCodebase((await plane.getSandbox(id)).codebaseId)).path);
        if (commit.interrupted !== undefined) {
          io.stderr.write(`agentfense: the commit stopped early (${commit.interrupted}); run it again\n`);
          result.exitCode = 1;
        } else if (commit.conflicts.length > 0) result.exitCode = EXIT_CONFLICT;
      });
    });

  addDataOption(
    sandbox
      .command('discard')
      .description(
        "drop a sandbox's changes (an unfinished commit is given up: what it applied stays in the codebase)",
      )
      .argument('<id>', 'sandbox id'),
  ).action(async (id: string, flags: DataFlags) => {
    await withControlPlane(flags, async (plane) => {
      await plane.discard(id);
      io.stderr.write(`agentfense: discarded the changes of ${id}\n`);
    });
  });

  addDataOption(
    sandbox
      .command('destroy')
      .description('destroy sandboxes (their uncommitted changes are dropped)')
      .argument('<id...>', 'sandbox ids'),
  ).action(async (ids: string[], flags: DataFlags) => {
    await withControlPlane(flags, async (plane) => {
      for (const id of ids) {
        await plane.destroySandbox(id);
        io.stderr.write(`agentfense: destroyed ${id}\n`);
      }
    });
  });

  registerCheckpoints(sandbox, context);
}
