// What every flow of one policy point shares: the current policy, the resolver, the table of open
// connections (bounded, re-decided on every policy change) and the audit sink.
import { destinationLabel } from './audit.js';
import type { NetworkAuditSink } from './audit.js';
import { ClientTable } from './clients.js';
import { CompiledPolicy } from './decide.js';
import type { Decision, Destination } from './decide.js';
import type { NetworkPolicy } from './policy.js';
import { NativeRelay } from './relay.js';
import type { Resolver } from './resolver.js';
import type { SecretSet } from './secret-set.js';

/** One open connection the policy allowed: what decided it, so a policy change can decide it again. */
export interface Tracked {
  readonly dest: Destination & { readonly address: string; readonly port: number };
  readonly via: 'proxy' | 'transparent';
  readonly started: number;
  /** Ends it now (both sides). */
  readonly close: () => void;
}

export class FlowContext {
  #policy: CompiledPolicy;
  readonly resolver: Resolver;
  readonly maxConnections: number;
  readonly #audit: NetworkAuditSink;
  #relay: NativeRelay | undefined | null = null;
  /**
   * Accepted client sockets, and connections the native relay holds in their place (the bound applies
   * to these: each carries at most one upstream at a time).
   */
  readonly clients: ClientTable;
  /**
   * The C accept path's table of decided connections (fast-accept.ts), when it runs: forgotten before
   * a new policy applies, so that nothing the old one allowed starts through it afterwards.
   */
  fast: { forget(): void } | undefined;
  readonly open = new Set<Tracked>();
  /** The sandbox's secrets; absent: nothing is intercepted. */
  readonly secrets: SecretSet | undefined;

  constructor(options: {
    policy: NetworkPolicy;
    resolver: Resolver;
    maxConnections: number;
    audit: NetworkAuditSink;
    secrets?: SecretSet;
  }) {
    this.secrets = options.secrets;
    this.#policy = new CompiledPolicy(options.policy);
    this.resolver = options.resolver;
    this.maxConnections = options.maxConnections;
    this.clients = new ClientTable(options.maxConnections);
    this.#audit = options.audit;
  }

  /** The splice relay of allowed tunnels, made at first use; undefined: they are piped in Node. */
  get relay(): NativeRelay | undefined {
    if (this.#relay === null) this.#relay = NativeRelay.create();
    return this.#relay;
  }

  get policy(): CompiledPolicy {
    return this.#policy;
  }

  /** Replaces the policy and ends every open connection it no longer allows. */
  setPolicy(policy: NetworkPolicy): number {
    this.fast?.forget();
    this.#policy = new CompiledPolicy(policy);
    let closed = 0;
    for (const flow of [...this.open]) {
      const decision = this.#policy.decide(flow.dest);
      if (decision.allowed) continue;
      closed++;
      this.open.delete(flow);
      flow.close();
      this.record(flow.dest, flow.via, {
        ...decision,
        reason: `closed by a policy change: ${decision.reason}`,
      });
    }
    return closed;
  }

  /**
   * The decision for an address without a name of its own: allowed if any name the sandbox was given
   * for it is allowed there, else by address rules alone (CIDR rules, mode open).
   */
  decideAddress(address: string, port: number): { decision: Decision; name?: string } {
    for (const name of this.resolver.namesFor(address)) {
      const decision = this.#policy.decide({ name, address, port });
      if (decision.allowed) return { decision, name };
    }
    return { decision: this.#policy.decide({ address, port }) };
  }

  /**
   * Whether `name` really is at `address`: the sandbox was told so, or the host's resolver says so now.
   * A TLS server name or HTTP Host that does not resolve to the dialled address is a spoof.
   */
  async nameIsAt(name: string, address: string): Promise<boolean> {
    if (this.resolver.namesFor(address).includes(name)) return true;
    return (await this.resolver.resolve(name)).includes(address);
  }

  record(
    dest: Destination,
    via: 'proxy' | 'transparent',
    decision: Decision,
    traffic?: { bytesUp: number; bytesDown: number; started: number },
  ): void {
    this.#audit({
      time: traffic?.started ?? Date.now(),
      op: 'connect',
      path: destinationLabel(dest.name, dest.address, dest.port ?? 0),
      decision: decision.allowed ? 'allow' : 'deny',
      ...(decision.rule === undefined ? {} : { rule: decision.rule }),
      reason: decision.reason,
      ...(dest.name === undefined ? {} : { name: dest.name }),
      ...(dest.address === undefined ? {} : { address: dest.address }),
      ...(dest.port === undefined ? {} : { port: dest.port }),
      ...(dest.method === undefined ? {} : { method: dest.method }),
      via,
      ...(traffic === undefined
        ? {}
        : {
            bytesUp: traffic.bytesUp,
            bytesDown: traffic.bytesDown,
            durationMs: Date.now() - traffic.started,
          }),
    });
  }

  /** One request that carried secret `secret` to `dest`: the name and host, never the value. */
  recordSecret(
    secret: string,
    dest: Destination & { readonly name: string },
    method: string,
    via: 'proxy' | 'transparent',
  ): void {
    this.#audit({
      time: Date.now(),
      op: 'secret',
      path: destinationLabel(dest.name, dest.address, dest.port ?? 0),
      decision: 'allow',
      reason: `secret ${secret} put into a ${method} request to ${dest.name}`,
      name: dest.name,
      ...(dest.address === undefined ? {} : { address: dest.address }),
      ...(dest.port === undefined ? {} : { port: dest.port }),
      method,
      secret,
      via,
    });
  }

  recordDns(name: string, decision: Decision): void {
    this.#audit({
      time: Date.now(),
      op: 'dns',
      path: name,
      decision: decision.allowed ? 'allow' : 'deny',
      ...(decision.rule === undefined ? {} : { rule: decision.rule }),
      reason: decision.reason,
      name,
      via: 'dns',
    });
  }
}
