// A sandbox's network policy as the manager applies it: the options every policy point gets, its start
// in a cgroup of its own, and a policy change on a running sandbox (its policy point closes what the new
// policy no longer allows).
import { readFileSync } from 'node:fs';
import { InvalidArgumentError, WrongStateError } from '@agentfense/protocol';
import { SandboxNetwork } from '@agentfense/network';
import type {
  NetworkAuditEvent,
  NetworkOptions,
  NetworkPolicy,
  PolicyPointExit,
  SecretSetOptions,
} from '@agentfense/network';
import type { Logger } from 'pino';
import type { SandboxRow, SandboxStore } from '../store/sandboxes.js';
import type { AuditWriter } from '@agentfense/audit-trail';
import { createNetworkCgroup, networkMemoryBound } from './network-cgroup.js';
import type { NetworkCgroup } from './network-cgroup.js';
import type { Live } from './start.js';

/**
 * The control plane's network options, with the operator's hosts file, connection bound and the extra CAs
 * of upstreams a secret is bound to (a PEM file) from the environment by default
 * (AGENTFENSE_NETWORK_HOSTS, AGENTFENSE_NETWORK_MAX_CONNECTIONS, AGENTFENSE_NETWORK_UPSTREAM_CA: the CLI and
 * `serve` have no other way to set them; a refused connection's audit record names the bound's).
 */
export function networkOptions(options: NetworkOptions | undefined): NetworkOptions {
  const hostsFile = options?.hostsFile ?? process.env['AGENTFENSE_NETWORK_HOSTS'];
  const maxConnections = options?.maxConnections ?? connectionsFromEnv();
  const caFile = process.env['AGENTFENSE_NETWORK_UPSTREAM_CA'];
  const upstreamCa =
    options?.upstreamCa ?? (caFile === undefined || caFile === '' ? undefined : readFileSync(caFile, 'utf8'));
  return {
    ...(hostsFile === undefined || hostsFile === '' ? {} : { hostsFile }),
    ...(maxConnections === undefined ? {} : { maxConnections }),
    ...(options?.memory === undefined ? {} : { memory: options.memory }),
    ...(upstreamCa === undefined ? {} : { upstreamCa }),
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

/** What starting a sandbox's policy point needs from the start (start.ts). */
export interface PolicyPointStart {
  readonly row: SandboxRow;
  /** The sandbox's state directory (its namespace file is made there). */
  readonly stateDir: string;
  /** true: make the namespace; false: set up the one the runtime published. */
  readonly create: boolean;
  readonly network: NetworkOptions;
  readonly store: SandboxStore;
  readonly audit: AuditWriter;
  readonly logger: Logger;
  /** The sandbox's secrets and CA (docs/secrets.md), when it has any; upstreamCa comes from `network`. */
  readonly secrets?: Omit<SecretSetOptions, 'upstreamCa'>;
  /** Masks secret values in audit records before they are written (a second line: secrets.ts). */
  readonly redact?: (events: readonly NetworkAuditEvent[]) => readonly NetworkAuditEvent[];
}

/**
 * Starts a sandbox's policy point in its own cgroup (network-cgroup.ts: a memory bound from the
 * sandbox's memory limit, the sandbox's CPU quota), removed with the sandbox's mounts. A policy point
 * that dies (the kernel killing it at its bound, a crash) ends that sandbox's network only: the reason
 * is logged and kept as the running sandbox's state reason; the sandbox, its files and every other
 * sandbox carry on.
 */
export async function startPolicyPoint(options: PolicyPointStart): Promise<SandboxNetwork> {
  const { row, logger, store } = options;
  const { memory, upstreamCa, ...network } = options.network;
  const cgroup = await createNetworkCgroup({
    sandboxId: row.id,
    boundBytes: networkMemoryBound(row.resources.memoryBytes, memory),
    cpuQuota: row.resources.cpuQuota,
    cpuShares: row.resources.cpuShares,
    logger,
  });
  const oomBefore = cgroup?.oomKills() ?? null;
  return SandboxNetwork.start({
    sandboxId: row.id,
    stateDir: options.stateDir,
    policy: row.network,
    create: options.create,
    ...network,
    ...(options.secrets === undefined
      ? {}
      : { secrets: { ...options.secrets, ...(upstreamCa === undefined ? {} : { upstreamCa }) } }),
    onAudit: (events) => options.audit.append(options.redact === undefined ? events : options.redact(events)),
    ...(cgroup === null ? {} : { place: (pid: number) => cgroup.attach(pid) }),
    onExit: (exited, exit) => {
      const reason = policyPointExitReason({ exited, exit, cgroup, oomBefore });
      logger.error({ reason }, 'the network policy point exited: the sandbox has no network');
      void (async () => {
        if ((await store.find(row.id))?.state === 'RUNNING')
          await store.update(row.id, { state_reason: `no network: ${reason}` });
      })().catch((err: unknown) => logger.warn({ err }, 'recording the lost network failed'));
    },
  });
}

/** A SIGKILL while the cgroup's OOM counter grew is the kernel enforcing the bound: said so, with the fix. */
function policyPointExitReason(options: {
  readonly exited: string;
  readonly exit: PolicyPointExit;
  readonly cgroup: NetworkCgroup | null;
  readonly oomBefore: number | null;
}): string {
  const { exit, cgroup, oomBefore } = options;
  const after = cgroup?.oomKills() ?? null;
  if (exit.signal !== 'SIGKILL' || cgroup === null || oomBefore === null || after === null)
    return options.exited;
  if (after <= oomBefore) return options.exited;
  const mib = Math.round(cgroup.boundBytes / (1024 * 1024));
  return (
    `the network policy point went over its memory bound of ${mib} MiB and the kernel killed it ` +
    `(by default 128 MiB + 1/16 of the sandbox's memory limit: give the sandbox more memory to raise it)`
  );
}
