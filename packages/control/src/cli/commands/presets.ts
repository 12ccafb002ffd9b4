// `agentfense presets`: the available presets, and `presets show <name>` for one preset's rules.
import type { Command } from 'commander';
import { compileRules } from '@agentfense/protocol/core';
import { defaultPresets } from '../../presets/registry.js';
import { formatTable, printJson } from '../io.js';
import type { CliContext } from '../io.js';

/** Registers `presets` (list) and `presets show` on the program. */
export function registerPresets(program: Command, { io }: CliContext): void {
  const presets = program
    .command('presets')
    .description('list the permission presets')
    .option('--json', 'machine-readable output')
    .enablePositionalOptions()
    .action((flags: { json?: boolean }) => {
      const all = defaultPresets.list();
      if (flags.json === true) {
        printJson(io, all);
        return;
      }
      io.stdout.write(`${formatTable(all.map((p) => [p.name, p.description]))}\n`);
    });
  presets
    .command('show')
    .description("print a preset's rules, as resolved (inferred type, default priority)")
    .argument('<name>', 'preset name')
    .option('--json', 'print the rules as a JSON array usable with --rules')
    .action((name: string, flags: { json?: boolean }) => {
      const preset = defaultPresets.get(name);
      if (flags.json === true) {
        printJson(io, preset.rules);
        return;
      }
      const resolved = compileRules(preset.rules).rules;
      io.stdout.write(`${preset.name}: ${preset.description}\n`);
      io.stdout.write(
        `${formatTable([
          ['#', 'PATTERN', 'TYPE', 'PERMISSION', 'PRIORITY'],
          ...resolved.map((r, i) => [String(i), r.pattern, r.type, r.permission, String(r.priority)]),
        ])}\n`,
      );
    });
}
