// The network options shared by `run`, `shell` and `mcp`: `--network none|allow|open` (bare: open),
// rules from flags (`--allow-host H[:PORT]`, `--deny-host`, `--allow-cidr C[:PORT]`, `--deny-cidr`), a
// rules file and presets. Rules or presets without a mode mean `allow` (only what they allow).
import { isIP } from 'node:net';
import type { Command } from 'commander';
import { InvalidArgumentError } from '@agentfense/protocol/core';
import { NETWORK_MODES, parseHostFlag } from '@agentfense/network';
import type { NetworkMode, NetworkPolicyInput, NetworkRule } from '@agentfense/network';
import { readJsonFile } from '../rules-file.js';

export interface NetworkFlags {
  /** `true` when given without a value. */
  readonly network?: string | boolean;
  readonly allowHost?: readonly string[];
  readonly denyHost?: readonly string[];
  readonly allowCidr?: readonly string[];
  readonly denyCidr?: readonly string[];
  readonly networkRules?: string;
  readonly networkPreset?: readonly string[];
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** Adds the network options to a command. */
export function addNetworkOptions(command: Command): Command {
  return command
    .option(
      '--network [mode]',
      'none (default: a loopback of its own), allow (only what rules allow) or open (any public destination); bare: open',
    )
    .option(
      '--allow-host <host[:port]>',
      'allow a host name or *.domain, optionally one port (repeatable)',
      collect,
    )
    .option(
      '--deny-host <host[:port]>',
      'deny a host name or *.domain (repeatable; wins over an equal allow)',
      collect,
    )
    .option('--allow-cidr <cidr[:port]>', 'allow an address range, e.g. 10.1.0.0/16 (repeatable)', collect)
    .option('--deny-cidr <cidr[:port]>', 'deny an address range (repeatable)', collect)
    .option('--network-rules <file.json>', 'network rules: a JSON array, or { mode, rules, presets }')
    .option(
      '--network-preset <name>',
      'add a network preset: package-registries, model-apis (repeatable)',
      collect,
    );
}

function ruleOf(action: 'allow' | 'deny', kind: 'host' | 'cidr', value: string, flag: string): NetworkRule {
  const { target, port } = parseHostFlag(value, flag);
  // An address given to a host flag is a one-address range.
  const asCidr = kind === 'cidr' || isIP(target) !== 0;
  return {
    action,
    ...(asCidr ? { cidr: target } : { host: target }),
    ...(port === undefined ? {} : { ports: [port] }),
  };
}

/** The policy the flags give; undefined when none of them was used (the sandbox gets mode none). */
export async function networkFromFlags(
  flags: NetworkFlags,
  options: { readonly cwd?: string } = {},
): Promise<NetworkPolicyInput | undefined> {
  let mode: NetworkMode | undefined;
  if (flags.network === true) mode = 'open';
  else if (typeof flags.network === 'string') {
    if (!NETWORK_MODES.includes(flags.network as NetworkMode)) {
      throw new InvalidArgumentError(
        `--network ${flags.network}: expected one of ${NETWORK_MODES.join(', ')}`,
      );
    }
    mode = flags.network as NetworkMode;
  }
  const rules: unknown[] = [
    ...(flags.allowHost ?? []).map((v) => ruleOf('allow', 'host', v, '--allow-host')),
    ...(flags.denyHost ?? []).map((v) => ruleOf('deny', 'host', v, '--deny-host')),
    ...(flags.allowCidr ?? []).map((v) => ruleOf('allow', 'cidr', v, '--allow-cidr')),
    ...(flags.denyCidr ?? []).map((v) => ruleOf('deny', 'cidr', v, '--deny-cidr')),
  ];
  const presets = [...(flags.networkPreset ?? [])];
  if (flags.networkRules !== undefined) {
    const file = await readJsonFile(flags.networkRules, { ...options, what: 'network rules file' });
    if (Array.isArray(file)) rules.push(...(file as unknown[]));
    else if (typeof file === 'object' && file !== null) {
      const policy = file as { mode?: NetworkMode; rules?: unknown[]; presets?: string[] };
      mode ??= policy.mode;
      rules.push(...(policy.rules ?? []));
      presets.push(...(policy.presets ?? []));
    } else {
      throw new InvalidArgumentError(
        `network rules file ${flags.networkRules} must hold a JSON array of rules or { "mode", "rules", "presets" }`,
      );
    }
  }
  if (mode === undefined && rules.length === 0 && presets.length === 0) return undefined;
  return { ...(mode === undefined ? {} : { mode }), rules, presets };
}
