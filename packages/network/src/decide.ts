// The decision for one destination, made the way the file rules decide: the highest explicit priority
// wins, then the most specific rule, and a deny wins over an equally specific allow. Addresses of the
// host itself are never reachable; special ranges (private, link-local, CGNAT, ULA) only through a CIDR
// rule that names them.
import { BlockList, isIP } from 'node:net';
import { canonicalAddress, classifyAddress, hostAddressesSeen } from './addresses.js';
import type { NetworkPolicy, NetworkRule } from './policy.js';

/** What is known of a destination. `port` absent: any port (a DNS question). */
export interface Destination {
  /** The name the agent asked for (DNS, TLS SNI, HTTP Host, CONNECT), lower-case without a final dot. */
  readonly name?: string;
  readonly address?: string;
  readonly port?: number;
  /** Plain HTTP only. */
  readonly method?: string;
}

export interface Decision {
  readonly allowed: boolean;
  /** Index of the deciding rule in the policy, when a rule decided. */
  readonly rule?: number;
  /** One line a person understands, e.g. `rule 2 (deny *.example.com)` or `no rule allows it`. */
  readonly reason: string;
}

interface Compiled {
  readonly index: number;
  readonly rule: NetworkRule;
  readonly cidr?: { readonly list: BlockList; readonly type: 'ipv4' | 'ipv6' };
  /** Compared lexicographically, larger = more specific. */
  readonly specificity: readonly number[];
}

/**
 * Decisions remembered per policy version. A decision is a pure function of the policy and the
 * destination (and the host's own addresses: forgotten when they are read again), and a connection asks for the same
 * few several times (by address, by its TLS name, on a policy change); address classes and CIDR
 * ranges cost microseconds each through BlockList, on a new connection's path. Bounded: cleared when full.
 */
const MEMO_LIMIT = 4_096;

/** A policy compiled for repeated decisions (the policy point keeps one per policy version). */
export class CompiledPolicy {
  readonly policy: NetworkPolicy;
  readonly #rules: readonly Compiled[];
  readonly #memo = new Map<string, Decision>();
  #memoHostVersion = hostAddressesSeen();

  /** Whether any rule names methods: then a plain-HTTP request's decision depends on its method. */
  readonly hasMethodRules: boolean;

  constructor(policy: NetworkPolicy) {
    this.policy = policy;
    this.#rules = policy.rules.map((rule, index) => compile(rule, index)).sort((a, b) => compareRules(b, a));
    this.hasMethodRules = policy.rules.some((rule) => rule.methods !== undefined);
  }

  decide(dest: Destination): Decision {
    // Every field the decision reads, in an encoding no two destinations share (a name is not always
    // a clean token: a Host header's may hold spaces).
    const key = JSON.stringify([dest.name, dest.address, dest.port, dest.method]);
    if (this.#memoHostVersion !== hostAddressesSeen()) {
      this.#memo.clear(); // the host's addresses changed: "the host itself" may name others now
      this.#memoHostVersion = hostAddressesSeen();
    }
    const known = this.#memo.get(key);
    if (known !== undefined) return known;
    const decision = this.#decide(dest);
    if (this.#memo.size >= MEMO_LIMIT) this.#memo.clear();
    this.#memo.set(key, decision);
    return decision;
  }

  #decide(dest: Destination): Decision {
    const { mode } = this.policy;
    if (mode === 'none') return { allowed: false, reason: 'the sandbox has no network (mode none)' };
    const address = dest.address === undefined ? undefined : canonicalAddress(dest.address);
    const cls = address === undefined ? undefined : classifyAddress(address);
    if (cls === 'never') {
      return {
        allowed: false,
        reason: `${address} is the host itself, loopback or multicast: never reachable`,
      };
    }
    const canonical = address === undefined ? dest : { ...dest, address };
    const winner = this.#rules.find((c) => matches(c, canonical));
    if (winner !== undefined && winner.rule.action === 'deny') {
      return { allowed: false, rule: winner.index, reason: describe(winner) };
    }
    if (cls === 'special' && address !== undefined) {
      const named = this.#rules.find(
        (c) => c.rule.action === 'allow' && c.cidr !== undefined && matches(c, canonical),
      );
      if (named === undefined) {
        return {
          allowed: false,
          reason: `${address} is a private, link-local or reserved address: only a CIDR rule naming it allows it`,
        };
      }
      return { allowed: true, rule: named.index, reason: describe(named) };
    }
    if (winner !== undefined) return { allowed: true, rule: winner.index, reason: describe(winner) };
    if (mode === 'open') return { allowed: true, reason: 'mode open: a public destination' };
    return { allowed: false, reason: 'no rule allows it (mode allow)' };
  }

  /**
   * Whether a name may be resolved at all: some host rule allows it (mode allow) or none denies it for
   * every port (mode open). CIDR rules never make a name resolvable: names reach the upstream resolver
   * only when a rule names them, so queries cannot carry data out.
   */
  mayResolve(name: string): Decision {
    if (this.policy.mode === 'none')
      return { allowed: false, reason: 'the sandbox has no network (mode none)' };
    const winner = this.#rules.find(
      (c) =>
        c.rule.host !== undefined &&
        hostMatches(c.rule.host, name) &&
        (c.rule.action === 'allow' || (c.rule.ports === undefined && c.rule.methods === undefined)),
    );
    if (winner !== undefined) {
      return { allowed: winner.rule.action === 'allow', rule: winner.index, reason: describe(winner) };
    }
    return this.policy.mode === 'open'
      ? { allowed: true, reason: 'mode open' }
      : { allowed: false, reason: 'no rule allows the name (mode allow)' };
  }
}

export function hostMatches(pattern: string, name: string): boolean {
  if (pattern.startsWith('*.')) return name.endsWith(pattern.slice(1)) && name.length > pattern.length - 1;
  return name === pattern;
}

function compile(rule: NetworkRule, index: number): Compiled {
  let cidr: Compiled['cidr'];
  let kind = 0;
  let width = 0;
  if (rule.cidr !== undefined) {
    const [net = '', prefix = ''] = rule.cidr.split('/');
    const type = isIP(net) === 4 ? 'ipv4' : 'ipv6';
    const list = new BlockList();
    list.addSubnet(net, Number(prefix), type);
    cidr = { list, type };
    kind = 1;
    // A /32 is as specific as a /128: compare prefixes relative to the family's width.
    width = Number(prefix) / (type === 'ipv4' ? 32 : 128);
  } else if (rule.host !== undefined) {
    const wildcard = rule.host.startsWith('*.');
    kind = wildcard ? 2 : 3;
    width = rule.host.split('.').length;
  }
  const specificity = [
    rule.priority ?? 0,
    kind,
    width,
    rule.ports === undefined ? 0 : 1,
    rule.methods === undefined ? 0 : 1,
    rule.action === 'deny' ? 1 : 0,
  ];
  return { index, rule, ...(cidr === undefined ? {} : { cidr }), specificity };
}

function compareRules(a: Compiled, b: Compiled): number {
  for (let i = 0; i < a.specificity.length; i++) {
    const d = (a.specificity[i] ?? 0) - (b.specificity[i] ?? 0);
    if (d !== 0) return d;
  }
  return b.index - a.index; // equal in every respect: the earlier rule first
}

function matches(c: Compiled, dest: Destination): boolean {
  const { rule } = c;
  if (rule.ports !== undefined) {
    if (dest.port === undefined) {
      if (rule.action === 'deny') return false; // a port-bound deny does not refuse "any port"
    } else if (!rule.ports.includes(dest.port)) return false;
  }
  if (rule.methods !== undefined) {
    if (dest.method === undefined) {
      if (rule.action === 'deny' || dest.port !== undefined) return false;
    } else if (!rule.methods.includes(dest.method)) return false;
  }
  if (rule.host !== undefined) return dest.name !== undefined && hostMatches(rule.host, dest.name);
  if (c.cidr !== undefined && dest.address !== undefined) {
    return (
      isIP(dest.address) === (c.cidr.type === 'ipv4' ? 4 : 6) && c.cidr.list.check(dest.address, c.cidr.type)
    );
  }
  return false;
}

export function describeRule(rule: NetworkRule): string {
  const parts: string[] = [rule.action, rule.host ?? rule.cidr ?? '?'];
  if (rule.ports !== undefined) parts.push(`ports ${rule.ports.join(',')}`);
  if (rule.methods !== undefined) parts.push(`methods ${rule.methods.join(',')}`);
  if (rule.priority !== undefined) parts.push(`priority ${rule.priority}`);
  return parts.join(' ');
}

function describe(c: Compiled): string {
  return `rule ${c.index} (${describeRule(c.rule)})`;
}
