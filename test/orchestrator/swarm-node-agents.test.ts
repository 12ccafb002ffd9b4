// The cluster path end to end on a real three-node Swarm (dockerd per network namespace, this test's
// own): a node agent per node in that node's network, sandboxes placed by the Swarm adapter and spread by
// Swarm, each attached through the agent `locate` names and used there (the view's rules in force on every
// node, a session, files, diff and commit), one worker node killed with everything on it (its sandboxes
// reported lost, placed again by Swarm on the others, attached again, the codebase visible, the lost
// node's changes gone with it), and everything torn down. AF_SWARM_SANDBOXES sets how many (30 by
// default). Skipped with the reason only on a host without docker.io or root; AF_REQUIRE_DOCKER=1 fails.
import { randomUUID } from 'node:crypto';
import { mkdtemp, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlacementStatus } from '@agentfense/orchestrator';
import type { SwarmOrchestrator } from '@agentfense/orchestrator/swarm';
import { call, exec, sessionRun } from '../helpers/node-agent.js';
import { startClusterAgents, type ClusterAgents, type NodeAgentOnNode } from '../helpers/swarm-agents.js';
import {
  createSwarmCluster,
  processesLeftOn,
  swarmPrerequisiteMissing,
  type SwarmCluster,
} from '../helpers/swarm-cluster.js';
import { SwarmWatch } from '../helpers/swarm-watch.js';

const NODE_LABEL = 'agentfense.node-agent';
const AGENT_PORT = 7300;
const COUNT = Number(process.env['AF_SWARM_SANDBOXES'] ?? 30);
/** Attaches at once: each starts a FUSE worker and enters a container; 2 cores are shared. */
const PARALLEL = 4;
const RULES = [
  { pattern: '**', permission: 'write' },
  { pattern: 'secret.txt', permission: 'none' },
  { pattern: 'docs/**', permission: 'read' },
];

const missing = await swarmPrerequisiteMissing();
if (missing !== undefined) {
  if (process.env['AF_REQUIRE_DOCKER'] === '1') throw new Error(`the Swarm test cannot run: ${missing}`);
  console.warn(`swarm node agent test skipped: ${missing}`);
}

const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/** Runs `fn` over `items`, at most `n` at a time. */
async function pool<T>(items: readonly T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: n }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
    }),
  );
}

describe.skipIf(missing !== undefined)(
  `node agents on a three-node Swarm: ${COUNT} sandboxes, a node lost`,
  { timeout: 600_000 },
  () => {
    let cluster: SwarmCluster | undefined;
    let agents: ClusterAgents | undefined;
    let watch: SwarmWatch | undefined;
    let adapter: SwarmOrchestrator;
    let source: string;
    const sandboxes = Array.from({ length: COUNT }, () => `sb_${randomUUID()}`);
    /** Where each sandbox is attached now. */
    const attachedOn = new Map<string, NodeAgentOnNode>();

    beforeAll(async () => {
      const t0 = performance.now();
      source = await mkdtemp(join(tmpdir(), 'af-swarm-codebase-'));
      await mkdir(join(source, 'docs'));
      await writeFile(join(source, 'readme.txt'), 'hello from the codebase\n');
      await writeFile(join(source, 'secret.txt'), 'the secret\n');
      await writeFile(join(source, 'docs', 'guide.txt'), 'read only\n');
      cluster = await createSwarmCluster({
        nodes: 3,
        nodeLabel: NODE_LABEL,
        heartbeat: '1s',
        log: (l) => console.log(`swarm: ${l}`),
      });
      agents = await startClusterAgents(cluster, { port: AGENT_PORT, codebase: source });
      console.log(
        `swarm: cluster and agents up in ${Math.round(performance.now() - t0)} ms (load ${load()})`,
      );
      watch = new SwarmWatch({
        dockerHost: cluster.manager.dockerHost,
        nodeAgentPort: AGENT_PORT,
        nodeLabel: NODE_LABEL,
      });
      adapter = watch.adapter;
    }, 300_000);

    afterAll(async () => {
      await watch?.stop();
      await agents?.stop();
      await cluster?.destroy();
      if (source !== undefined) await rm(source, { recursive: true, force: true });
    }, 120_000);

    async function until<T>(what: string, check: () => T | undefined, timeoutMs = 120_000): Promise<T> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const value = check();
        if (value !== undefined) return value;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await sleep(100);
      }
    }

    const seen = (): SwarmWatch['seen'] => watch!.seen;
    const latest = (): Map<string, PlacementStatus> => watch!.latest();

    /** Attaches `sandboxId` through the agent `locate` names; retried while its container is not up yet. */
    async function attach(sandboxId: string): Promise<NodeAgentOnNode> {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const where = await adapter.locate(sandboxId);
        const on = where === undefined ? undefined : agents!.at(where.nodeAgent.host);
        if (on !== undefined) {
          expect(where!.nodeAgent.port).toBe(AGENT_PORT);
          const r = await call(on.agent, agents!.token, 'POST', '/v1/sandboxes', {
            sandboxId,
            codebasePath: on.codebase,
            rules: RULES,
          });
          if (r.status === 201) {
            attachedOn.set(sandboxId, on);
            return on;
          }
          // 404: Swarm's task is running but the node's engine has not started the container yet.
          if (r.status !== 404 || Date.now() > deadline)
            throw new Error(`attach answered ${r.status}: ${r.text}`);
        } else if (Date.now() > deadline) {
          throw new Error(`no node agent located for ${sandboxId}: ${JSON.stringify(where)}`);
        }
        await sleep(250);
      }
    }

    /** What a user checks in a sandbox: the codebase readable, the hidden file absent, a denied write. */
    async function checkRules(sandboxId: string): Promise<void> {
      const on = attachedOn.get(sandboxId)!;
      const { token } = agents!;
      expect(await exec(on.agent, token, sandboxId, ['cat', '/workspace/readme.txt'])).toEqual({
        stdout: 'hello from the codebase\n',
        stderr: '',
        exitCode: 0,
      });
      const hidden = await exec(on.agent, token, sandboxId, ['cat', '/workspace/secret.txt']);
      expect(hidden.exitCode).toBe(1);
      expect(hidden.stderr).toContain('No such file or directory');
      const denied = await exec(on.agent, token, sandboxId, [
        'sh',
        '-c',
        'echo x > /workspace/docs/guide.txt',
      ]);
      expect(denied.exitCode).not.toBe(0);
      expect(denied.stderr).toContain('Permission denied');
    }

    it(`places ${COUNT} sandboxes over the three nodes and uses each through its node's agent`, async () => {
      const { nodes } = cluster!;
      const t0 = performance.now();
      for (const sandboxId of sandboxes) {
        await adapter.place({
          sandboxId,
          image: cluster!.image,
          resources: { cpuMillis: 50, memoryBytes: 64 * 2 ** 20 },
        });
      }
      const ready = await until(`all ${COUNT} ready`, () => {
        const last = latest();
        const all = sandboxes.map((id) => last.get(id));
        return all.every((s) => s?.state === 'ready') ? all : undefined;
      });
      const tReady = performance.now();
      const perNode = Object.fromEntries(
        nodes.map((n) => [n.hostname, ready.filter((s) => s.nodeName === n.hostname).length]),
      );
      console.log(
        `swarm: ${COUNT} placed and ready in ${Math.round(tReady - t0)} ms, spread ${JSON.stringify(perNode)} (load ${load()})`,
      );
      // Swarm spreads equal nodes evenly; allow it a little unevenness, never an empty node.
      for (const node of nodes)
        expect(perNode[node.hostname], node.hostname).toBeGreaterThanOrEqual(COUNT / 3 - 2);

      await pool(sandboxes, PARALLEL, async (sandboxId) => {
        const on = await attach(sandboxId);
        // The agent `locate` named is the one on the node Swarm reported.
        expect(on.node.hostname).toBe((latest().get(sandboxId) as { nodeName: string }).nodeName);
      });
      const tAttached = performance.now();
      await pool(sandboxes, PARALLEL, checkRules);
      console.log(
        `swarm: ${COUNT} attached in ${Math.round(tAttached - tReady)} ms, three execs on each in ${Math.round(performance.now() - tAttached)} ms (load ${load()})`,
      );
      for (const { agent, node } of agents!.agents) {
        const health = await call(agent, agents!.token, 'GET', '/v1/health');
        expect(health.json['node']).toBe(node.hostname);
        expect((health.json['sandboxes'] as unknown[]).length).toBe(perNode[node.hostname]);
      }

      // On one sandbox per node: a session, files, diff and a commit to that node's codebase.
      for (const on of agents!.agents) {
        const sandboxId = sandboxes.find((id) => attachedOn.get(id) === on)!;
        const { token, agent } = { token: agents!.token, agent: on.agent };
        const base = `/v1/sandboxes/${sandboxId}`;
        const opened = await call(agent, token, 'POST', `${base}/sessions`, {});
        expect(opened.status).toBe(201);
        const ses = opened.json['id'] as string;
        await sessionRun(agent, token, sandboxId, ses, 'cd /workspace/docs');
        const said = await sessionRun(
          agent,
          token,
          sandboxId,
          ses,
          'echo "on $(hostname) in $(pwd): $(cat guide.txt)"',
        );
        expect(said.stdout).toBe('on sandbox in /workspace/docs: read only\n');
        expect((await call(agent, token, 'DELETE', `${base}/sessions/${ses}`)).status).toBe(200);

        const wrote = await exec(agent, token, sandboxId, [
          'sh',
          '-c',
          `echo ${on.node.hostname} > /workspace/new.txt`,
        ]);
        expect(wrote.exitCode).toBe(0);
        const file = await call(agent, token, 'GET', `${base}/files?path=new.txt`);
        expect(Buffer.from(file.json['data'] as string, 'base64').toString()).toBe(`${on.node.hostname}\n`);
        expect((await call(agent, token, 'GET', `${base}/files?path=secret.txt`)).status).toBe(404);
        const diff = await call(agent, token, 'GET', `${base}/diff`);
        expect(diff.json['diff']).toContain(`+${on.node.hostname}`);
        const commit = await call(agent, token, 'POST', `${base}/commit`, {});
        expect(commit.status, commit.text).toBe(200);
        // The commit lands in the codebase of the node the sandbox runs on.
        expect(await readFile(join(on.codebase, 'new.txt'), 'utf8')).toBe(`${on.node.hostname}\n`);
      }
    });

    it('loses the sandboxes of a killed worker node, places them again elsewhere, and attaches them there', async () => {
      const { nodes, manager } = cluster!;
      // A worker (the manager must stay up to answer) and its sandboxes, each with a change not committed.
      const victim = agents!.agents.find((a) => a.node !== manager && [...attachedOn.values()].includes(a))!;
      const onVictim = sandboxes.filter((id) => attachedOn.get(id) === victim);
      for (const id of onVictim) {
        expect(
          (await exec(victim.agent, agents!.token, id, ['sh', '-c', 'echo left > /workspace/left.txt']))
            .exitCode,
        ).toBe(0);
      }
      const mark = seen().length;
      const t0 = performance.now();
      await cluster!.killNode(victim.node);
      const lost = await until('node-lost for each', () => {
        const l = seen()
          .slice(mark)
          .filter((s) => s.status.state === 'lost' && onVictim.includes(s.status.sandboxId));
        return l.length === onVictim.length ? l : undefined;
      });
      for (const { status } of lost) {
        expect(status).toMatchObject({
          state: 'lost',
          reason: 'node-lost',
          nodeName: victim.node.hostname,
          replaced: true,
        });
      }
      await until('ready again on other nodes', () =>
        onVictim.every((id) =>
          seen()
            .slice(mark)
            .some((s) => s.status.sandboxId === id && s.status.state === 'ready'),
        )
          ? true
          : undefined,
      );
      const tReady = performance.now();
      await pool(onVictim, PARALLEL, async (id) => {
        const on = await attach(id);
        expect(on).not.toBe(victim);
      });
      const tAttached = performance.now();
      for (const id of onVictim) {
        await checkRules(id);
        // The change since the last checkpoint stayed on the lost node.
        const left = await exec(attachedOn.get(id)!.agent, agents!.token, id, ['cat', '/workspace/left.txt']);
        expect(left.exitCode).toBe(1);
        expect(left.stderr).toContain('No such file or directory');
      }
      console.log(
        `swarm: killed ${victim.node.hostname} (${onVictim.length} sandboxes): lost after ${Math.round(Math.max(...lost.map((s) => s.at - t0)))} ms, ` +
          `ready elsewhere after ${Math.round(tReady - t0)} ms, attached again after ${Math.round(tAttached - t0)} ms (load ${load()})`,
      );
      // The surviving nodes hold all of them, and their own sandboxes were never reported lost.
      const others = sandboxes.filter((id) => !onVictim.includes(id));
      expect(
        seen()
          .slice(mark)
          .filter((s) => others.includes(s.status.sandboxId) && s.status.state === 'lost'),
      ).toEqual([]);
      let attached = 0;
      for (const { agent, node } of agents!.agents.filter((a) => a !== victim)) {
        const health = await call(agent, agents!.token, 'GET', '/v1/health');
        attached += (health.json['sandboxes'] as unknown[]).length;
        expect(nodes).toContain(node);
      }
      expect(attached).toBe(COUNT);
      await checkRules(others[0]!);
    });

    it('detaches and removes every sandbox, then tears the cluster down leaving nothing', async () => {
      const { token } = agents!;
      await pool(sandboxes, PARALLEL, async (id) => {
        const on = attachedOn.get(id)!;
        const r = await call(on.agent, token, 'DELETE', `/v1/sandboxes/${id}?dropDelta=true`);
        expect(r.status, r.text).toBe(200);
        await adapter.remove(id);
      });
      await until('all gone', () =>
        sandboxes.every((id) => latest().get(id)?.state === 'gone') ? true : undefined,
      );
      expect(await adapter.findUnowned(() => false)).toEqual([]);
      const alive = agents!.agents.filter(
        (a) => a.agent.child.exitCode === null && a.agent.child.signalCode === null,
      );
      expect(alive.length).toBe(2);
      for (const { agent } of alive) {
        expect((await call(agent, token, 'GET', '/v1/health')).json['sandboxes']).toEqual([]);
      }

      await watch!.stop();
      watch = undefined;
      await agents!.stop();
      const { stateDir, nodes } = cluster!;
      await cluster!.destroy();
      const mounts = await readFile('/proc/self/mountinfo', 'utf8');
      expect(mounts.split('\n').filter((l) => l.includes(stateDir))).toEqual([]);
      const netns = (await execa('ip', ['netns', 'list'])).stdout;
      for (const node of nodes) expect(netns).not.toContain(node.netns);
      // The killed node's sandbox containers too (each has a network namespace of its own).
      expect(await processesLeftOn(nodes)).toEqual([]);
      expect(await stat(stateDir).catch(() => null)).toBeNull();
      for (const { agent } of agents!.agents)
        expect(agent.child.exitCode ?? agent.child.signalCode).not.toBeNull();
    });
  },
);
