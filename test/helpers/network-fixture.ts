// One test file's network fixture: the test hosts (test-net.ts), a control plane whose policy points
// resolve the test names from their hosts file, a linked codebase, and sandboxes made with a given
// network policy. Everything is destroyed afterwards, and the test fails if a mount is left behind.
import { afterAll, beforeAll } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import type { ControlPlaneOptions, NetworkPolicyInput, SecretInput } from '@agentfense/control';
import type { NetworkMemoryOptions } from '@agentfense/network';
import type { ExecResult, ResourceLimits } from '@agentfense/protocol';
import { assertCleanAndRemove, makeDirs } from './control-fixtures.js';
import type { TestDirs } from './control-fixtures.js';
import { makeTestNet } from './test-net.js';
import type { TestNet } from './test-net.js';

export interface NetSandbox {
  readonly id: string;
  /** Runs a shell command; stdout/stderr as strings. */
  run(command: string, timeoutMs?: number): Promise<ExecResult & { out: string; err: string }>;
}

export interface NetworkFixture {
  readonly cp: ControlPlane;
  readonly net: TestNet;
  readonly dirs: TestDirs;
  sandbox(
    network: boolean | NetworkPolicyInput,
    options?: {
      runtime?: string;
      image?: string;
      resources?: ResourceLimits;
      secrets?: SecretInput[];
      env?: Record<string, string>;
    },
  ): Promise<NetSandbox>;
}

export function useNetworkFixture(
  options: Omit<ControlPlaneOptions, 'dataDir' | 'network'> & {
    maxConnections?: number;
    networkMemory?: NetworkMemoryOptions;
    upstreamCa?: string;
  } = {},
): () => NetworkFixture {
  let fixture: NetworkFixture | undefined;
  let net: TestNet | undefined;
  let dirs: TestDirs | undefined;
  let cp: ControlPlane | undefined;
  beforeAll(async () => {
    net = await makeTestNet();
    dirs = await makeDirs();
    const { maxConnections, networkMemory, upstreamCa, ...rest } = options;
    cp = await ControlPlane.open({
      ...rest,
      dataDir: dirs.dataDir,
      network: {
        hostsFile: net.hostsFile,
        ...(maxConnections === undefined ? {} : { maxConnections }),
        ...(networkMemory === undefined ? {} : { memory: networkMemory }),
        ...(upstreamCa === undefined ? {} : { upstreamCa }),
      },
    });
    const plane = cp;
    const { id: codebaseId } = await plane.linkCodebase({ path: dirs.repo });
    fixture = {
      cp: plane,
      net,
      dirs,
      sandbox: async (network, sandboxOptions = {}) => {
        const { id } = await plane.createSandbox({
          codebaseId,
          preset: 'agent-safe',
          network,
          ...(sandboxOptions.runtime === undefined ? {} : { runtime: sandboxOptions.runtime }),
          ...(sandboxOptions.image === undefined ? {} : { image: sandboxOptions.image }),
          ...(sandboxOptions.resources === undefined ? {} : { resources: sandboxOptions.resources }),
          ...(sandboxOptions.secrets === undefined ? {} : { secrets: sandboxOptions.secrets }),
          ...(sandboxOptions.env === undefined ? {} : { env: sandboxOptions.env }),
        });
        await plane.startSandbox(id);
        return {
          id,
          run: async (command, timeoutMs = 30_000) => {
            const r = await plane.run(id, command, { timeoutMs, encoding: 'buffer' });
            return { ...r, out: r.stdout.toString(), err: r.stderr.toString() };
          },
        };
      },
    };
  }, 120_000);
  afterAll(async () => {
    for (const sb of (await cp?.listSandboxes())?.items ?? []) await cp?.destroySandbox(sb.id);
    await cp?.close();
    await net?.close();
    if (dirs !== undefined) await assertCleanAndRemove(dirs);
  }, 120_000);
  return () => {
    if (fixture === undefined) throw new Error('network fixture not started');
    return fixture;
  };
}
