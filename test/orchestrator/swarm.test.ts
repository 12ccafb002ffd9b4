// The Swarm adapter on a real Swarm: three dockerd nodes in network namespaces this test makes. Six
// sandboxes are placed and spread over the nodes by Swarm, located on the node whose own engine runs
// their container with the reserved CPU and memory; one node's dockerd is killed and the watch reports
// its sandboxes lost with it and ready again on the other nodes; removing them ends in `gone`. The time
// from the kill to each report is printed with the load. Skipped with the reason only when this host
// lacks docker.io (or root); with AF_REQUIRE_DOCKER=1 that is a failure. The managers' heartbeat is 1 s
// (a dead node is declared down after a few seconds); AF_SWARM_HEARTBEAT=5s measures Swarm's default.
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlacementStatus } from '@agentfense/orchestrator';
import { SANDBOX_ID_LABEL, type SwarmOrchestrator } from '@agentfense/orchestrator/swarm';
import { createSwarmCluster, swarmPrerequisiteMissing, type SwarmCluster } from '../helpers/swarm-cluster.js';
import { SwarmWatch } from '../helpers/swarm-watch.js';

const NODE_LABEL = 'agentfense.node-agent';
const HEARTBEAT = process.env['AF_SWARM_HEARTBEAT'] ?? '1s';
const missing = await swarmPrerequisiteMissing();
if (missing !== undefined) {
  if (process.env['AF_REQUIRE_DOCKER'] === '1') throw new Error(`the Swarm test cannot run: ${missing}`);
  console.warn(`swarm test skipped: ${missing}`);
}

const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

describe.skipIf(missing !== undefined)('Swarm adapter on a three-node Swarm', { timeout: 240_000 }, () => {
  let cluster: SwarmCluster | undefined;
  let watch: SwarmWatch | undefined;
  let adapter: SwarmOrchestrator;
  const sandboxes = Array.from({ length: 6 }, () => `sb_${randomUUID()}`);

  beforeAll(async () => {
    const t0 = performance.now();
    cluster = await createSwarmCluster({
      nodes: 3,
      nodeLabel: NODE_LABEL,
      heartbeat: HEARTBEAT,
      log: (l) => console.log(`swarm: ${l}`),
    });
    console.log(`swarm: cluster up in ${Math.round(performance.now() - t0)} ms (load ${load()})`);
    watch = new SwarmWatch({
      dockerHost: cluster.manager.dockerHost,
      nodeAgentPort: 7300,
      nodeLabel: NODE_LABEL,
    });
    adapter = watch.adapter;
  }, 180_000);

  afterAll(async () => {
    await watch?.stop();
    await cluster?.destroy();
  }, 60_000);

  async function until<T>(what: string, check: () => T | undefined, timeoutMs = 60_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = check();
      if (value !== undefined) return value;
      if (Date.now() > deadline) {
        throw new Error(
          `timed out waiting for ${what}; seen: ${JSON.stringify(seen().map((s) => s.status))}`,
        );
      }
      await sleep(100);
    }
  }

  const seen = (): SwarmWatch['seen'] => watch!.seen;
  const latest = (): Map<string, PlacementStatus> => watch!.latest();

  /** Sandbox ids whose container the node's own engine runs (its containers, by the adapter's label). */
  async function runningOn(dockerHost: string): Promise<string[]> {
    const out = await execa('docker', [
      '-H',
      dockerHost,
      'ps',
      '--filter',
      `label=${SANDBOX_ID_LABEL}`,
      '--format',
      `{{.Label "${SANDBOX_ID_LABEL}"}}`,
    ]);
    return out.stdout.split('\n').filter(Boolean);
  }

  it('places six sandboxes over the three nodes, and locate names the node that runs each', async () => {
    const { nodes } = cluster!;
    const t0 = performance.now();
    for (const sandboxId of sandboxes) {
      await adapter.place({
        sandboxId,
        image: cluster!.image,
        resources: { cpuMillis: 100, memoryBytes: 32 * 2 ** 20 },
      });
    }
    const ready = await until('all six ready', () => {
      const last = latest();
      const all = sandboxes.map((id) => last.get(id));
      return all.every((s) => s?.state === 'ready') ? all : undefined;
    });
    console.log(`swarm: six placed and ready in ${Math.round(performance.now() - t0)} ms (load ${load()})`);
    const perNode = new Map(
      nodes.map((n) => [n.hostname, ready.filter((s) => s.nodeName === n.hostname).length]),
    );
    console.log(`swarm: spread ${JSON.stringify(Object.fromEntries(perNode))}`);
    for (const node of nodes) expect(perNode.get(node.hostname), node.hostname).toBeGreaterThan(0);

    for (const node of nodes) {
      const here = ready.filter((s) => s.nodeName === node.hostname).map((s) => s.sandboxId);
      expect((await runningOn(node.dockerHost)).sort()).toEqual(here.sort());
      for (const sandboxId of here) {
        expect(await adapter.locate(sandboxId)).toEqual({
          sandboxId,
          nodeName: node.hostname,
          podIP: '',
          nodeAgent: { host: node.address, port: 7300 },
        });
      }
    }

    // What was asked is what the container got, on the node Swarm picked.
    const first = ready[0]!;
    const node = nodes.find((n) => n.hostname === first.nodeName)!;
    const id = (
      await execa('docker', [
        '-H',
        node.dockerHost,
        'ps',
        '-q',
        '--filter',
        `label=${SANDBOX_ID_LABEL}=${first.sandboxId}`,
      ])
    ).stdout.trim();
    const limits = await execa('docker', [
      '-H',
      node.dockerHost,
      'inspect',
      '--format',
      '{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}} {{.HostConfig.PidsLimit}}',
      id,
    ]);
    expect(limits.stdout.trim()).toBe(`${100_000_000} ${32 * 2 ** 20} 1024`);
  });

  it('reports the sandboxes of a node whose dockerd died as node-lost, then ready on the others', async () => {
    const { nodes, manager } = cluster!;
    const last = latest();
    // A worker that runs at least one sandbox (the manager must stay up to answer).
    const victim = nodes.find(
      (n) =>
        n !== manager &&
        sandboxes.some((id) => (last.get(id) as { nodeName?: string }).nodeName === n.hostname),
    )!;
    const onVictim = sandboxes.filter(
      (id) => (last.get(id) as { nodeName?: string }).nodeName === victim.hostname,
    );
    const mark = seen().length;
    const t0 = performance.now();
    cluster!.kill(victim);
    const lostAt = await until('node-lost reported for each', () => {
      const lost = seen()
        .slice(mark)
        .filter((s) => s.status.state === 'lost' && onVictim.includes(s.status.sandboxId));
      return lost.length === onVictim.length ? lost : undefined;
    });
    for (const { status } of lostAt) {
      expect(status).toMatchObject({
        state: 'lost',
        reason: 'node-lost',
        nodeName: victim.hostname,
        replaced: true,
      });
    }
    const readyAgain = await until('ready again elsewhere', () => {
      const again = onVictim.map((id) =>
        seen()
          .slice(mark)
          .find((s) => s.status.sandboxId === id && s.status.state === 'ready'),
      );
      return again.every((s) => s !== undefined) ? again : undefined;
    });
    const toLost = Math.max(...lostAt.map((s) => s.at - t0));
    const toReady = Math.max(...readyAgain.map((s) => s.at - t0));
    console.log(
      `swarm: heartbeat ${HEARTBEAT}; killed ${victim.hostname}'s dockerd (${onVictim.length} sandboxes): node-lost after ${Math.round(toLost)} ms, ` +
        `ready on other nodes after ${Math.round(toReady)} ms (load ${load()})`,
    );
    for (const { status } of readyAgain) {
      expect(status.state === 'ready' && status.nodeName).not.toBe(victim.hostname);
      const where = await adapter.locate(status.sandboxId);
      const node = nodes.find((n) => n.hostname === where?.nodeName)!;
      expect(where?.nodeAgent.host).toBe(node.address);
      expect(await runningOn(node.dockerHost)).toContain(status.sandboxId);
    }
    // Sandboxes on the surviving nodes were never reported lost.
    const others = sandboxes.filter((id) => !onVictim.includes(id));
    expect(
      seen()
        .slice(mark)
        .filter((s) => others.includes(s.status.sandboxId) && s.status.state === 'lost'),
    ).toEqual([]);
  });

  it('keeps a sandbox no node can take pending with Swarm reason', async () => {
    const sandboxId = `sb_${randomUUID()}`;
    sandboxes.push(sandboxId);
    await adapter.place({
      sandboxId,
      image: cluster!.image,
      resources: { cpuMillis: 64_000, memoryBytes: 2 ** 26 },
    });
    const pending = await until('pending with a reason', () => {
      const status = latest().get(sandboxId);
      return status?.state === 'pending' && status.detail.includes('no suitable node') ? status : undefined;
    });
    console.log(`swarm: a sandbox asking for 64 cores: ${JSON.stringify(pending)}`);
    expect(await adapter.locate(sandboxId)).toBeUndefined();
  });

  it('removes every sandbox: the watch reports each gone and nothing of ours is left', async () => {
    for (const sandboxId of sandboxes) await adapter.remove(sandboxId);
    await until('all gone', () =>
      sandboxes.every((id) => latest().get(id)?.state === 'gone') ? true : undefined,
    );
    expect(await adapter.findUnowned(() => false)).toEqual([]);
    expect(await adapter.locate(sandboxes[0]!)).toBeUndefined();
  });
});
