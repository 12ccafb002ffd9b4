// A sandbox's network policy: a mode and rules, validated once at every boundary (library, CLI, HTTP,
// gRPC) into this one shape, which is what the store keeps and the policy point enforces.
import { isIP } from 'node:net';
import { InvalidArgumentError } from '@agentfense/protocol';
import { NETWORK_PRESETS } from './presets.js';

/**
 * - `none`: a loopback of its own and nothing else (the default);
 * - `allow`: default-deny, only what a rule allows;
 * - `open`: any public destination, minus what a rule denies.
 */
export const NETWORK_MODES = ['none', 'allow', 'open'] as const;
export type NetworkMode = (typeof NETWORK_MODES)[number];

/** One egress rule. Exactly one of `host` and `cidr`. */
export interface NetworkRule {
  readonly action: 'allow' | 'deny';
  /** A host name, or a wildcard over whole labels: `*.github.com` (any depth below), `github.com`. */
  readonly host?: string;
  /** An IPv4 or IPv6 range, `10.0.0.0/8`, `2001:db8::/32`; a bare address is a /32 or /128. */
  readonly cidr?: string;
  /** Destination ports; absent: any port. */
  readonly ports?: readonly number[];
  /** Plain-HTTP methods (`GET`, `HEAD`, …); absent: any. A rule with methods never matches TLS. */
  readonly methods?: readonly string[];
  /** Higher wins before specificity is compared; default 0. */
  readonly priority?: number;
}

export interface NetworkPolicy {
  readonly mode: NetworkMode;
  readonly rules: readonly NetworkRule[];
}

/** What callers may pass: presets are expanded into rules here. */
export interface NetworkPolicyInput {
  readonly mode?: NetworkMode;
  readonly rules?: readonly unknown[];
  readonly presets?: readonly string[];
}

export const NETWORK_NONE: NetworkPolicy = { mode: 'none', rules: [] };

const HOST_LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;
const METHOD = /^[A-Z]{1,20}$/;

function fail(where: string, message: string): never {
  throw new InvalidArgumentError(`network ${where}: ${message}`);
}

/** Lower-cases and checks a host pattern: whole labels, an optional leading `*.`. */
export function normalizeHostPattern(value: string, where: string): string {
  const host = value.trim().toLowerCase().replace(/\.$/, '');
  const bare = host.startsWith('*.') ? host.slice(2) : host;
  if (bare.length === 0 || bare.length > 253 || !bare.split('.').every((l) => HOST_LABEL.test(l))) {
    fail(where, `${JSON.stringify(value)} is not a host name or a \`*.domain\` wildcard`);
  }
  return host;
}

/** Checks a CIDR (or a bare address) and returns it with an explicit prefix. */
export function normalizeCidr(value: string, where: string): string {
  const [address = '', prefixText, extra] = value.trim().split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) {
    fail(where, `${JSON.stringify(value)} is not an address range such as 10.0.0.0/8 or 2001:db8::/32`);
  }
  const max = family === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) {
    fail(where, `the prefix of ${JSON.stringify(value)} must be 0-${max}`);
  }
  return `${address.toLowerCase()}/${prefix}`;
}

function validatePorts(value: unknown, where: string): number[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0) fail(where, '`ports` must be a non-empty array');
  return value.map((p: unknown) => {
    if (!Number.isInteger(p) || (p as number) < 1 || (p as number) > 65_535) {
      fail(where, `port ${JSON.stringify(p)} must be an integer 1-65535`);
    }
    return p as number;
  });
}

function validateRule(raw: unknown, where: string): NetworkRule {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) fail(where, 'must be an object');
  const r = raw as Record<string, unknown>;
  for (const key of Object.keys(r)) {
    if (!['action', 'host', 'cidr', 'ports', 'methods', 'priority'].includes(key)) {
      fail(
        where,
        `unknown field ${JSON.stringify(key)} (known: action, host, cidr, ports, methods, priority)`,
      );
    }
  }
  if (r['action'] !== 'allow' && r['action'] !== 'deny') fail(where, '`action` must be "allow" or "deny"');
  const hasHost = typeof r['host'] === 'string';
  const hasCidr = typeof r['cidr'] === 'string';
  if (hasHost === hasCidr) fail(where, 'give exactly one of `host` (a name) and `cidr` (an address range)');
  const ports = validatePorts(r['ports'], where);
  let methods: string[] | undefined;
  if (r['methods'] !== undefined) {
    if (!Array.isArray(r['methods']) || r['methods'].length === 0) {
      fail(where, '`methods` must be a non-empty array such as ["GET", "HEAD"]');
    }
    methods = r['methods'].map((m: unknown) => {
      const upper = typeof m === 'string' ? m.toUpperCase() : '';
      if (!METHOD.test(upper)) fail(where, `method ${JSON.stringify(m)} is not an HTTP method`);
      return upper;
    });
  }
  const priority = r['priority'] ?? 0;
  if (!Number.isSafeInteger(priority)) fail(where, '`priority` must be an integer');
  return {
    action: r['action'],
    ...(hasHost ? { host: normalizeHostPattern(r['host'] as string, where) } : {}),
    ...(hasCidr ? { cidr: normalizeCidr(r['cidr'] as string, where) } : {}),
    ...(ports === undefined ? {} : { ports }),
    ...(methods === undefined ? {} : { methods }),
    ...(priority === 0 ? {} : { priority: priority as number }),
  };
}

/**
 * Validates a policy input: rules are checked one by one (errors name the rule's index), presets are
 * expanded after the explicit rules. Rules or presets without a mode mean `allow`.
 */
export function validateNetworkPolicy(input: NetworkPolicyInput | boolean | undefined): NetworkPolicy {
  if (input === undefined || input === false) return NETWORK_NONE;
  if (input === true) return { mode: 'open', rules: [] };
  if (typeof input !== 'object' || input === null)
    fail('policy', 'must be an object { mode, rules, presets }');
  const rulesIn = input.rules ?? [];
  const presets = input.presets ?? [];
  if (!Array.isArray(rulesIn)) fail('policy', '`rules` must be an array');
  if (!Array.isArray(presets)) fail('policy', '`presets` must be an array of preset names');
  const mode = input.mode ?? (rulesIn.length > 0 || presets.length > 0 ? 'allow' : 'none');
  if (!NETWORK_MODES.includes(mode)) {
    fail('policy', `mode ${JSON.stringify(mode)} is not one of ${NETWORK_MODES.join(', ')}`);
  }
  const rules = rulesIn.map((r, i) => validateRule(r, `rule ${i}`));
  for (const name of presets) {
    const preset = typeof name === 'string' ? NETWORK_PRESETS[name] : undefined;
    if (preset === undefined) {
      fail(
        'preset',
        `${JSON.stringify(name)} is unknown (known: ${Object.keys(NETWORK_PRESETS).join(', ')})`,
      );
    }
    rules.push(...preset.rules.map((r, i) => validateRule(r, `preset ${name} rule ${i}`)));
  }
  if (mode === 'none' && rules.length > 0) {
    fail('policy', 'mode "none" takes no rules: use mode "allow" (only what the rules allow) or "open"');
  }
  return { mode, rules };
}

/** Parses `host[:port]`, `[v6]:port` or `cidr[:port]` as the CLI flags take them. */
export function parseHostFlag(value: string, flag: string): { target: string; port?: number } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(value);
  if (bracketed !== null) {
    return bracketed[2] === undefined
      ? { target: bracketed[1] ?? '' }
      : { target: bracketed[1] ?? '', port: Number(bracketed[2]) };
  }
  const colon = value.lastIndexOf(':');
  // A bare IPv6 address or range has several colons and no port.
  if (colon === -1 || value.indexOf(':') !== colon) return { target: value };
  const port = Number(value.slice(colon + 1));
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new InvalidArgumentError(`${flag} ${value}: the port after ':' must be 1-65535`);
  }
  return { target: value.slice(0, colon), port };
}
