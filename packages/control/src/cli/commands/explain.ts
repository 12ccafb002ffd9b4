// `agentfense explain`: which permission applies to each path and which rule decided it (contract §1, §7).
import type { Command } from 'commander';
import { compileRules, quotePath } from '@agentfense/protocol/core';
import { formatTable, printJson } from '../io.js';
import type { CliContext } from '../io.js';
import { addPolicyOptions, policyFromFlags } from '../policy-options.js';
import type { PolicyFlags } from '../policy-options.js';

/** Registers `explain` on the program. */
export function registerExplain(program: Command, { io }: CliContext): void {
  addPolicyOptions(
    program
      .command('explain')
      .description('show the permission of each codebase path and the rule that decided it')
      .argument('<path...>', 'codebase paths, e.g. /secrets/public.key (relative paths start at the root)'),
  )
    .option('--json', 'print a JSON array of { path, permission, rule } (rule is null when no rule matched)')
    .action(async (paths: string[], flags: PolicyFlags & { json?: boolean }) => {
      const ruleSet = compileRules(await policyFromFlags(flags));
      const results = paths.map((path) => ruleSet.explain(path.startsWith('/') ? path : `/${path}`));
      if (flags.json === true) {
        printJson(
          io,
          results.map(({ path, permission, rule }) => ({ path, permission, rule })),
        );
        return;
      }
      const rows = results.map(({ path, permission, rule, traversable }) => [
        quotePath(path),
        permission === 'none' && traversable
          ? 'none (a directory here stays traversable: visible entries inside)'
          : permission,
        rule === null
          ? 'no rule matched (default deny)'
          : `rule #${rule.index} ${rule.type} ${quotePath(rule.pattern)} -> ${rule.permission} (priority ${rule.priority})`,
      ]);
      io.stdout.write(`${formatTable(rows)}\n`);
    });
}
