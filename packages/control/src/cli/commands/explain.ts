// `agentfense explain`: which permission applies to each path and which rule decided it (contract §1, §7),
// and with `--host` which network decision applies to a destination under the network options given.
import { isIP } from 'node:net';
import type { Command } from 'commander';
import { InvalidArgumentError, compileRules, quotePath } from '@agentfense/protocol/core';
import { CompiledPolicy, parseHostFlag, validateNetworkPolicy } from '@agentfense/network';
import { formatTable, printJson } from '../io.js';
import type { CliContext } from '../io.js';
import { addNetworkOptions, networkFromFlags } from '../network-options.js';
import type { NetworkFlags } from '../network-options.js';
import { addPolicyOptions, policyFromFlags } from '../policy-options.js';
import type { PolicyFlags } from '../policy-options.js';

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

type ExplainFlags = PolicyFlags & NetworkFlags & { json?: boolean; host?: string[] };

/** Registers `explain` on the program. */
export function registerExplain(program: Command, { io }: CliContext): void {
  addNetworkOptions(
    addPolicyOptions(
      program
        .command('explain')
        .description(
          'show the permission of each codebase path and the rule that decided it; with --host, the network decision for a destination',
        )
        .argument('[path...]', 'codebase paths, e.g. /secrets/public.key (relative paths start at the root)'),
    ),
  )
    .option(
      '--host <host[:port]>',
      'a destination to decide under the network options (repeatable; port default 443)',
      collect,
    )
    .option('--json', 'print a JSON array of { path, permission, rule } (rule is null when no rule matched)')
    .action(async (paths: string[], flags: ExplainFlags) => {
      if (flags.host !== undefined) {
        if (paths.length > 0) throw new InvalidArgumentError('give either paths or --host, not both');
        await explainHosts(io, flags);
        return;
      }
      if (paths.length === 0) throw new InvalidArgumentError('give codebase paths to explain, or --host');
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

/**
 * The decision for each `--host` by name (or by address for a literal): what a connection there gets,
 * before the address it resolves to is checked (the host's own and private addresses are refused at
 * connect time unless a CIDR rule names them).
 */
async function explainHosts(io: CliContext['io'], flags: ExplainFlags): Promise<void> {
  const policy = new CompiledPolicy(validateNetworkPolicy((await networkFromFlags(flags)) ?? false));
  const results = (flags.host ?? []).map((value) => {
    const { target, port = 443 } = parseHostFlag(value, '--host');
    const literal = isIP(target) !== 0;
    const name = target.toLowerCase();
    const decision = policy.decide(literal ? { address: target, port } : { name, port });
    const dns = literal ? undefined : policy.mayResolve(name);
    return { host: target, port, decision, resolves: dns?.allowed };
  });
  if (flags.json === true) {
    printJson(io, results);
    return;
  }
  const rows = results.map(({ host, port, decision, resolves }) => [
    `${quotePath(host)}:${port}`,
    decision.allowed ? 'allow' : 'deny',
    decision.reason,
    resolves === undefined ? '' : resolves ? 'DNS: resolves' : 'DNS: NXDOMAIN',
  ]);
  io.stdout.write(`${formatTable(rows)}\n`);
}
