// The `--preset P | --rules FILE` options shared by every command that takes a policy.
import type { Command } from 'commander';
import { InvalidArgumentError } from '@agentfense/protocol/core';
import type { PermissionRule } from '@agentfense/protocol';
import { resolvePolicy } from '../policy.js';
import { loadRulesFile } from '../rules-file.js';

export interface PolicyFlags {
  readonly preset?: string;
  readonly rules?: string;
}

/** Adds the policy options to a command. */
export function addPolicyOptions(command: Command): Command {
  return command
    .option('--preset <name>', 'permission preset (see `agentfense presets`); default agent-safe')
    .option('--rules <file.json>', 'JSON array of permission rules instead of a preset');
}

/** The rules selected by the flags (a rules file is read and validated). */
export async function policyFromFlags(
  flags: PolicyFlags,
  options: { readonly cwd?: string } = {},
): Promise<PermissionRule[]> {
  // Refuse the ambiguous combination before touching the filesystem, so the error names the real problem.
  if (flags.preset !== undefined && flags.rules !== undefined) {
    throw new InvalidArgumentError('give either --preset or --rules, not both');
  }
  const rules = flags.rules === undefined ? undefined : await loadRulesFile(flags.rules, options);
  return resolvePolicy({ preset: flags.preset, rules });
}
