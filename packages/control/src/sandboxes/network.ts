// A sandbox's network policy as the manager applies it: the options every policy point gets, and a
// policy change on a running sandbox (its policy point closes what the new policy no longer allows).
import { readFileSync } from 'node:fs';
import { WrongStateError } from '@agentfense/protocol';
import type { NetworkOptions, NetworkPolicy } from '@agentfense/network';
import type { Live } from './start.js';

/**
 * The control plane's network options, with the operator's hosts file and the extra CAs of upstreams a
 * secret is bound to (a PEM file) from the environment by default.
 */
export function networkOptions(options: NetworkOptions | undefined): NetworkOptions {
  const hostsFile = options?.hostsFile ?? process.env['AGENTFENSE_NETWORK_HOSTS'];
  const caFile = process.env['AGENTFENSE_NETWORK_UPSTREAM_CA'];
  const upstreamCa =
    options?.upstreamCa ?? (caFile === undefined || caFile === '' ? undefined : readFileSync(caFile, 'utf8'));
  return {
    ...(hostsFile === undefined || hostsFile === '' ? {} : { hostsFile }),
    ...(options?.maxConnections === undefined ? {} : { maxConnections: options.maxConnections }),
    ...(upstreamCa === undefined ? {} : { upstreamCa }),
  };
}

/**
 * Applies `policy` to a running sandbox. One started without a network (mode none) has no namespace of
 * its own to police: it takes a policy with a network at its next start.
 */
export async function applyNetworkPolicy(id: string, live: Live, policy: NetworkPolicy): Promise<void> {
  if (live.network !== undefined) {
    await live.network.setPolicy(policy);
    return;
  }
  if (policy.mode !== 'none') {
    throw new WrongStateError(
      `sandbox ${id} was started without a network (mode none): stop it and start it again to give it network mode ${policy.mode}`,
    );
  }
}
