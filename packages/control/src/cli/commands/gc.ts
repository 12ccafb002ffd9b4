// `agentfense gc`: removes what nothing refers to any more and prints what it removed (policy in
// src/sandboxes/gc.ts and docs/decisions.md, "Garbage collection lists what it might remove before it reads
// the records"). `serve` runs the same collection (without codebases) when it starts.
import type { Command } from 'commander';
import { InvalidArgumentError, quotePath } from '@agentfense/protocol/core';
import type { GcReport } from '../../sandboxes/gc.js';
import { addDataOption, withControlPlane } from '../control-options.js';
import type { DataFlags } from '../control-options.js';
import { printJson } from '../io.js';
import type { CliContext, CliIo } from '../io.js';

interface GcFlags extends DataFlags {
  readonly dryRun?: boolean;
  readonly json?: boolean;
  readonly stoppedOlderThan?: string;
  readonly codebases: boolean;
  readonly allHelpers?: boolean;
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** `30m`, `12h`, `7d`, or plain seconds. */
export function parseAge(value: string): number {
  const match = /^(\d+(?:\.\d+)?)([smhd]?)$/.exec(value.trim());
  const seconds = match === null ? NaN : Number(match[1]) * (UNITS[match[2] || 's'] ?? NaN);
  if (!Number.isFinite(seconds) || seconds < 0) {
    throw new InvalidArgumentError(
      `--stopped-older-than ${JSON.stringify(value)}: expected a duration like 30m, 12h or 7d`,
    );
  }
  return seconds * 1000;
}

/** Prints a report for people (one line per thing removed, then what was kept). */
export function printGcReport(io: CliIo, report: GcReport): void {
  const verb = report.dryRun ? 'would remove' : 'removed';
  for (const s of report.sandboxes) io.stdout.write(`${verb} sandbox ${s.id} (${s.state}): ${s.reason}\n`);
  for (const m of report.mounts)
    io.stdout.write(`${report.dryRun ? 'would clear' : 'cleared'} mount ${quotePath(m)}\n`);
  for (const d of report.directories) io.stdout.write(`${verb} orphaned directory ${quotePath(d)}\n`);
  for (const r of report.runtimes) io.stdout.write(`removed ${r}\n`);
  for (const c of report.codebases)
    io.stdout.write(`${verb} linked codebase ${c.id} (${quotePath(c.path)}; the directory is untouched)\n`);
  for (const e of report.errors) io.stderr.write(`agentfense: gc: could not remove ${e.what}: ${e.error}\n`);
  const removed =
    report.sandboxes.length +
    report.mounts.length +
    report.directories.length +
    report.runtimes.length +
    report.codebases.length;
  if (removed === 0) io.stdout.write('nothing to collect\n');
  if (report.kept.length > 0) {
    io.stdout.write(
      `kept ${report.kept.length} stopped sandbox(es): ${report.kept.map((k) => k.id).join(', ')} ` +
        '(remove with `agentfense sandbox destroy ID` or `agentfense gc --stopped-older-than 7d`)\n',
    );
  }
  if (report.unfinished.length > 0) {
    io.stdout.write(
      `kept ${report.unfinished.length} sandbox(es) whose commit did not finish: ` +
        `${report.unfinished.map((k) => k.id).join(', ')} ` +
        '(finish with `agentfense sandbox commit ID`, give up with `agentfense sandbox discard ID`)\n',
    );
  }
}

/**
 * `--all-helpers`: stops (with --dry-run, lists) the data directory's run helpers before collecting, so
 * their spare sandboxes are gone and nothing of theirs is in use. False when one did not exit.
 */
async function stopHelpers(io: CliIo, flags: GcFlags): Promise<boolean> {
  const [{ resolveDataDir }, { runHelperPids, stopRunHelpers }] = await Promise.all([
    import('../../paths.js'),
    import('../run-helper/stop-all.js'),
  ]);
  const dataDir = resolveDataDir({ dataDir: flags.data });
  if (flags.dryRun === true) {
    for (const pid of await runHelperPids(dataDir)) io.stdout.write(`would stop run helper ${pid}\n`);
    return true;
  }
  const { stopped, running } = await stopRunHelpers(dataDir);
  for (const pid of stopped) io.stdout.write(`stopped run helper ${pid}\n`);
  for (const pid of running) {
    io.stderr.write(
      `agentfense: gc: run helper ${pid} did not exit within 30 s of SIGTERM (kill -9 ${pid})\n`,
    );
  }
  return running.length === 0;
}

/** Registers `gc` on the program. */
export function registerGc(program: Command, { io, result }: CliContext): void {
  addDataOption(
    program
      .command('gc')
      .description(
        'remove what nothing refers to: sandboxes of runs that died, failed destroys, orphaned directories and mounts, unreferenced linked codebases',
      ),
  )
    .option('--dry-run', 'only print what would be removed')
    .option('--json', 'print the report as JSON')
    .option(
      '--stopped-older-than <age>',
      'also destroy sandboxes stopped longer ago than this (30m, 12h, 7d)',
    )
    .option('--no-codebases', 'keep linked codebase records nothing refers to')
    .option(
      '--all-helpers',
      'first stop every run helper of the data directory (their runs are stopped, their spare sandboxes removed)',
    )
    .action(async (flags: GcFlags) => {
      const olderThan = flags.stoppedOlderThan === undefined ? undefined : parseAge(flags.stoppedOlderThan);
      if (flags.allHelpers === true && !(await stopHelpers(io, flags))) {
        result.exitCode = 1;
        return;
      }
      const report = await withControlPlane(flags, (plane) =>
        plane.gc({
          dryRun: flags.dryRun === true,
          codebases: flags.codebases,
          ...(olderThan === undefined ? {} : { stoppedOlderThanMs: olderThan }),
        }),
      );
      if (flags.json === true) printJson(io, report);
      else printGcReport(io, report);
      result.exitCode = report.errors.length > 0 ? 1 : 0;
    });
}
