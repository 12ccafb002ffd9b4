// A sandbox's network policy as the manager applies it: the options every policy point gets, and a
// policy change on a running sandbox (its policy point closes what the new policy no longer allows).
import { InvalidArgumentError, WrongStateError } from '@agentfense/protocol';
import type { NetworkOptions, NetworkPolicy } from '@agentfense/network';
import type { Live } from './start.js';

/**
 * The control plane's network options, with the operator's hosts file and connection bound from the
 * environment by default (AGENTFENSE_NETWORK_HOSTS, AGENTFENSE_NETWORK_MAX_CONNECTIONS: the CLI and
 * `serve` have no other way to set them, and a refused connection's audit record names the latter).
 */
export function networkOptions(options: NetworkOptions | undefined): NetworkOptions {
  const hostsFile = options?.hostsFile ?? process.env['AGENTFENSE_NETWORK_HOSTS'];
  const maxConnections = options?.maxConnections ?? connectionsFromEnv();
  return {
    ...(hostsFile === undefined || hostsFile === '' ? {} : { hostsFile }),
    ...(maxConnections === undefined ? {} : { maxConnections }),
  };
}

function connectionsFromEnv(): number | undefined {
  const text = process.env['AGENTFENSE_NETWORK_MAX_CONNECTIONS'];
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new InvalidArgumentError(
      `AGENTFENSE_NETWORK_MAX_CONNECTIONS must be a positive integer, got ${JSON.stringify(text)}`,
    );
  }
  return value;
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
