// `agentfense sandbox checkpoint|checkpoints|restore|checkpoint-delete|fork`: a sandbox's file state frozen
// and put back (sandboxes/checkpoints.ts).
import type { Command } from 'commander';
import type { CheckpointInfo } from '../../sandboxes/checkpoints.js';
import { addDataOption, withControlPlane } from '../control-options.js';
import type { DataFlags } from '../control-options.js';
import { formatTable, printJson } from '../io.js';
import type { CliContext } from '../io.js';

interface CheckpointFlags extends DataFlags {
  readonly name?: string;
  readonly message?: string;
  readonly json?: boolean;
}

interface RestoreFlags extends DataFlags {
  readonly keepCurrent?: boolean;
}

interface ForkFlags extends DataFlags {
  readonly checkpoint?: string;
  readonly count: string;
  readonly preset?: string;
}

function row(cp: CheckpointInfo): string[] {
  return [cp.id, new Date(cp.createdAt).toISOString(), cp.name ?? '', cp.message ?? ''];
}

/** Registers the checkpoint subcommands on `agentfense sandbox`. */
export function registerCheckpoints(sandbox: Command, { io }: CliContext): void {
  addDataOption(
    sandbox
      .command('checkpoint')
      .description("freeze a sandbox's files as they are now (restore comes back to them)")
      .argument('<id>', 'sandbox id')
      .option('--name <name>', 'a short label')
      .option('--message <text>', 'what the step before it did')
      .option('--json', 'print the checkpoint as JSON'),
  ).action(async (id: string, flags: CheckpointFlags) => {
    await withControlPlane(flags, async (plane) => {
      const cp = await plane.checkpoint(id, {
        ...(flags.name === undefined ? {} : { name: flags.name }),
        ...(flags.message === undefined ? {} : { message: flags.message }),
      });
      if (flags.json === true) printJson(io, cp);
      else io.stdout.write(`${cp.id}\n`);
    });
  });

  addDataOption(
    sandbox
      .command('checkpoints')
      .description("list a sandbox's checkpoints, oldest first")
      .argument('<id>', 'sandbox id')
      .option('--json', 'print them as JSON'),
  ).action(async (id: string, flags: CheckpointFlags) => {
    await withControlPlane(flags, async (plane) => {
      const list = await plane.listCheckpoints(id);
      if (flags.json === true) printJson(io, list);
      else io.stdout.write(formatTable([['ID', 'CREATED', 'NAME', 'MESSAGE'], ...list.map(row)]) + '\n');
    });
  });

  addDataOption(
    sandbox
      .command('restore')
      .description("put a sandbox's files back to a checkpoint (the changes since are dropped)")
      .argument('<id>', 'sandbox id')
      .argument('<checkpoint>', 'checkpoint id')
      .option('--keep-current', 'keep the changes since as a checkpoint of their own'),
  ).action(async (id: string, checkpoint: string, flags: RestoreFlags) => {
    await withControlPlane(flags, async (plane) => {
      const { kept } = await plane.restoreCheckpoint(id, checkpoint, {
        keepCurrent: flags.keepCurrent === true,
      });
      if (kept !== undefined) io.stderr.write(`agentfense: the changes since are checkpoint ${kept.id}\n`);
      io.stderr.write(`agentfense: ${id} restored to ${checkpoint}\n`);
    });
  });

  addDataOption(
    sandbox
      .command('checkpoint-delete')
      .description('delete checkpoints (their files go once no checkpoint or fork holds them)')
      .argument('<id>', 'sandbox id')
      .argument('<checkpoint...>', 'checkpoint ids'),
  ).action(async (id: string, checkpoints: string[], flags: DataFlags) => {
    await withControlPlane(flags, async (plane) => {
      for (const cp of checkpoints) {
        await plane.deleteCheckpoint(id, cp);
        io.stderr.write(`agentfense: deleted checkpoint ${cp}\n`);
      }
    });
  });

  addDataOption(
    sandbox
      .command('fork')
      .description(
        'new sandboxes (not started, as `run --keep` leaves its own) whose files start as a checkpoint (default: the files now), each with changes of its own',
      )
      .argument('<id>', 'sandbox id')
      .option('--checkpoint <id>', 'fork from this checkpoint')
      .option('--count <n>', 'how many sandboxes (1-32)', '1')
      .option('--preset <name>', "rules of the forks (default: the parent's)"),
  ).action(async (id: string, flags: ForkFlags) => {
    await withControlPlane(flags, async (plane) => {
      const count = Number(flags.count);
      const forks = await plane.forkSandbox(id, {
        count,
        // This process ends with the command: a sandbox it started would stop with it.
        start: false,
        ...(flags.checkpoint === undefined ? {} : { checkpointId: flags.checkpoint }),
        ...(flags.preset === undefined ? {} : { preset: flags.preset }),
      });
      for (const fork of forks) io.stdout.write(`${fork.id}\n`);
    });
  });
}
