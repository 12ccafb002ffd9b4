// The scale-out acceptance, end to end through `agentfense serve --orchestrator swarm`: a three-node
// Swarm in network namespaces (swarm-cluster.ts, a dockerd per namespace), a node agent on each node
// (swarm-serve.ts), one private PostgreSQL and two serve replicas over it. AF_SWARM_SANDBOXES sandboxes
// (30 by default) are created through the replicas in turn and placed by Swarm on all three nodes; on
// each node one is used through the other replica than made it (exec, the hidden file and the denied
// write, changes, diff, commit into the codebase) and every one has its rules checked; a session is
// opened through A and used through B; one worker node is killed with everything on it, its sandboxes are
// reported lost and come back attached on the others, usable; then everything is deleted and torn down,
// nothing of ours left on any node. Skipped with the reason only on a host without docker.io, root,
// PostgreSQL or the base image's root filesystem; AF_REQUIRE_DOCKER=1 makes that a failure.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_ID_LABEL } from '@agentfense/orchestrator/swarm';
import { client, launchServer, tokenFile, type Answer, type Served } from '../helpers/http-fixture.js';
import { call, errorCode } from '../helpers/mcp.js';
import { startPostgres, type PostgresCluster } from '../helpers/postgres.js';
import {
  createSwarmCluster,
  processesLeftOn,
  swarmPrerequisiteMissing,
  type SwarmCluster,
} from '../helpers/swarm-cluster.js';
import {
  baseTarball,
  load,
  loadSandboxImage,
  pool,
  startNodeAgents,
  until,
  type NodeAgentProcess,
} from '../helpers/swarm-serve.js';

const NODE_LABEL = 'agentfense.node-agent';
const IMAGE = 'agentfense/sandbox:swarm-test';
const PORT = 7300;
const COUNT = Number(process.env['AF_SWARM_SANDBOXES'] ?? 30);
/** Requests at once: each create starts a FUSE worker and enters a container; 2 cores are shared. */
const PARALLEL = 4;
const tarball = await baseTarball();
const missing =
  (await swarmPrerequisiteMissing()) ??
  (tarball === undefined ? 'no cached base root filesystem (run a docker test or scripts/setup)' : undefined);
if (missing !== undefined) {
  if (process.env['AF_REQUIRE_DOCKER'] === '1')
    throw new Error(`the serve-on-Swarm test cannot run: ${missing}`);
  console.warn(`serve-on-Swarm test skipped: ${missing}`);
}

/** One field of a JSON answer. */
const field = (answer: Answer, key: string): unknown => (answer.json as Record<string, unknown>)[key];

const permissions = [
  { pattern: '**', permission: 'write' },
  { pattern: 'secret.txt', permission: 'none' },
  { pattern: 'docs/**', permission: 'read' },
];

type Via = ReturnType<typeof client>;

describe.skipIf(missing !== undefined)(
  `serve placing ${COUNT} sandboxes on a three-node Swarm`,
  { timeout: 600_000 },
  () => {
    let cluster: SwarmCluster | undefined;
    let postgres: PostgresCluster | undefined;
    let agents: NodeAgentProcess[] = [];
    const replicas: Served[] = [];
    let dir: string | undefined;
    let vias: [Via, Via];
    let cb: string;
    const nodeToken = randomBytes(24).toString('hex');
    /** Each sandbox: which replica made it (0 or 1) and the node it runs on now. */
    const made = new Map<string, { by: 0 | 1; node: string }>();
    /** The other replica than the one that made `id`. */
    const other = (id: string): Via => vias[1 - made.get(id)!.by]!;

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'af-serve-swarm-'));
      postgres = await startPostgres();
      cluster = await createSwarmCluster({ nodes: 3, nodeLabel: NODE_LABEL, heartbeat: '1s' });
      await loadSandboxImage(cluster, tarball ?? '', IMAGE);
      const dataDir = join(dir, 'data');
      agents = await startNodeAgents(cluster, {
        token: nodeToken,
        dir,
        codebaseRoot: join(dataDir, 'codebases'),
        port: PORT,
      });
      const apiToken = (await tokenFile(dir)).file;
      const args = [
        ...['--token-file', apiToken, '--orchestrator', 'swarm'],
        ...['--swarm-manager', cluster.manager.dockerHost],
        ...['--node-agent-token-file', join(dir, 'node-agent-token')],
        ...['--node-agent-port', String(PORT), '--sandbox-image', IMAGE],
      ];
      const env = { ...process.env, AGENTFENSE_DATABASE: postgres.url } as Record<string, string>;
      replicas.push(await launchServer(args, dataDir, { env }));
      replicas.push(await launchServer(args, dataDir, { env }));
      vias = [client(replicas[0]!.url, replicas[0]!.token), client(replicas[1]!.url, replicas[1]!.token)];
    }, 300_000);

    afterAll(async () => {
      for (const served of replicas) await served.stop();
      for (const agent of agents) await agent.stop();
      await cluster?.destroy();
      await postgres?.stop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    }, 180_000);

    const exec = (via: Via, id: string, command: string) =>
      via('POST', `/v1/sandboxes/${id}/exec`, { command });
    /** The node a sandbox runs on, as its status says. */
    const nodeOf = async (via: Via, id: string): Promise<string | undefined> => {
      const reason = String(field(await via('GET', `/v1/sandboxes/${id}`), 'statusReason'));
      return /(?:placed|attached again) on node (swarm-\d)/.exec(reason)?.[1];
    };

    /** MCP over HTTP on a placed sandbox: a write, a read, the hidden file not found, a denied write. */
    async function viaMcp(served: Served, id: string): Promise<void> {
      const transport = new StreamableHTTPClientTransport(new URL(`${served.url}/mcp?sandbox_id=${id}`), {
        requestInit: { headers: { authorization: `Bearer ${served.token}` } },
      });
      const mcp = new Client({ name: 'agentfense-serve-swarm-test', version: '1.0.0' });
      await mcp.connect(transport);
      try {
        const wrote = await call(mcp, 'write_file', { path: 'mcp.txt', content: 'through mcp\n' });
        expect(wrote.isError, wrote.text).not.toBe(true);
        expect((await call(mcp, 'read_file', { path: 'mcp.txt' })).text).toContain('through mcp');
        expect(errorCode(await call(mcp, 'read_file', { path: 'secret.txt' }))).toBe('AF_NOT_FOUND');
        const denied = await call(mcp, 'write_file', { path: 'docs/guide.txt', content: 'x' });
        expect(denied.isError, denied.text).toBe(true);
        // The write is in the sandbox on its node, as an exec through the other replica sees.
        const seen = await exec(vias[made.get(id)!.by], id, 'cat /workspace/mcp.txt');
        expect(field(seen, 'stdout'), seen.text).toBe('through mcp\n');
      } finally {
        await transport.terminateSession();
        await mcp.close();
      }
    }

    /** What a user checks in a sandbox: the codebase there, the hidden file absent, a denied write. */
    async function checkRules(via: Via, id: string, readme: string): Promise<void> {
      const r = await exec(
        via,
        id,
        "cat /workspace/readme.txt; ls -a /workspace | grep -c '^secret'; cat /workspace/secret.txt; echo x > /workspace/docs/guide.txt",
      );
      expect(r.status, r.text).toBe(200);
      expect(field(r, 'stdout')).toBe(`${readme}0\n`);
      expect(field(r, 'stderr')).toMatch(/secret\.txt: No such file or directory[\s\S]*Permission denied/);
      expect(field(r, 'exitCode')).not.toBe(0);
    }

    it('spreads the sandboxes made through either replica over all three nodes, used through the other', async () => {
      const [viaA, viaB] = vias;
      cb = field(await viaA('POST', '/v1/codebases', { name: 'app' }), 'id') as string;
      for (const [path, text] of [
        ['readme.txt', 'hello from the codebase\n'],
        ['secret.txt', 'the secret\n'],
        ['docs/guide.txt', 'read only\n'],
      ] as const) {
        expect((await viaA('PUT', `/v1/codebases/${cb}/files/${path}`, text)).status).toBe(200);
      }
      const t0 = performance.now();
      await pool(
        Array.from({ length: COUNT }, (_, i) => i),
        PARALLEL,
        async (i) => {
          const by = (i % 2) as 0 | 1;
          const answer = await vias[by]('POST', '/v1/sandboxes', {
            codebase_id: cb,
            permissions,
            resources: { memory_bytes: 64 * 1024 * 1024, cpu_quota: 5_000 },
            start: true,
          });
          expect(answer.status, answer.text).toBe(200);
          made.set(field(answer, 'id') as string, { by, node: '' });
        },
      );
      const tMade = performance.now();
      const perNode: Record<string, number> = {};
      for (const [id, m] of made) {
        const status = await other(id)('GET', `/v1/sandboxes/${id}`);
        expect(field(status, 'status'), status.text).toMatch(/running/i);
        m.node = (await nodeOf(other(id), id)) ?? '';
        perNode[m.node] = (perNode[m.node] ?? 0) + 1;
      }
      console.log(
        `serve-swarm: ${COUNT} made and started in ${Math.round(tMade - t0)} ms, spread ${JSON.stringify(perNode)} (load ${load()})`,
      );
      for (const node of cluster!.nodes) expect(perNode[node.hostname], node.hostname).toBeGreaterThan(0);

      // Each container runs on the node its status names, with af-init as pid 1.
      for (const node of cluster!.nodes) {
        const ps = await execa('docker', ['-H', node.dockerHost, 'ps', '--format', '{{.Labels}}']);
        const here = [...made].filter(([, m]) => m.node === node.hostname).map(([id]) => id);
        for (const id of here) expect(ps.stdout).toContain(`${SANDBOX_ID_LABEL}=${id}`);
      }
      // The rules on every sandbox, through the other replica.
      await pool([...made.keys()], PARALLEL, (id) => checkRules(other(id), id, 'hello from the codebase\n'));
      console.log(`serve-swarm: rules checked on all ${COUNT} (load ${load()})`);

      // On one sandbox per node, through the other replica: exec, changes, diff, commit into the codebase.
      for (const node of cluster!.nodes) {
        const id = [...made].find(([, m]) => m.node === node.hostname)![0];
        const via = other(id);
        const init = await exec(via, id, 'cat /proc/1/comm; hostname');
        expect(field(init, 'stdout'), init.text).toBe('af-init\nsandbox\n');
        const wrote = await exec(via, id, `echo ${node.hostname} > /workspace/${node.hostname}.txt`);
        expect(field(wrote, 'exitCode') ?? 0, wrote.text).toBe(0);
        expect((await via('GET', `/v1/sandboxes/${id}/changes`)).text).toContain(`${node.hostname}.txt`);
        const diff = await via('GET', `/v1/sandboxes/${id}/diff`);
        expect(field(diff, 'diff')).toContain(`+${node.hostname}`);
        const commit = await via('POST', `/v1/sandboxes/${id}/commit`, {});
        expect(commit.status, commit.text).toBe(200);
        const file = await viaB('GET', `/v1/codebases/${cb}/files/${node.hostname}.txt`);
        expect(file.text).toBe(`${node.hostname}\n`);
        await viaMcp(made.get(id)!.by === 0 ? replicas[1]! : replicas[0]!, id);
      }
      // A commit made on one node is seen by a sandbox on another (the codebase is shared).
      const elsewhere = [...made].find(([, m]) => m.node !== cluster!.nodes[0]!.hostname)![0];
      const seen = await exec(
        other(elsewhere),
        elsewhere,
        `cat /workspace/${cluster!.nodes[0]!.hostname}.txt`,
      );
      expect(field(seen, 'stdout'), seen.text).toBe(`${cluster!.nodes[0]!.hostname}\n`);

      // A session opened through A and used through B: its shell runs on the node, so `cd` and
      // variables carry from a command sent through one replica to the next through the other.
      const id = [...made.keys()][0]!;
      const opened = await viaA('POST', `/v1/sandboxes/${id}/sessions`, { env: { GREETING: 'hi' } });
      expect(opened.status, opened.text).toBe(200);
      const sid = field(opened, 'id') as string;
      const inSession = (via: Via, command: string) => via('POST', `/v1/sessions/${sid}/exec`, { command });
      expect(field(await inSession(viaB, 'cd /workspace/docs && export SEEN=yes'), 'exitCode')).toBe(0);
      const said = await inSession(
        viaA,
        'echo "$GREETING $SEEN $(pwd)"; cat guide.txt; echo oops >&2; false',
      );
      expect(field(said, 'stdout'), said.text).toBe('hi yes /workspace/docs\nread only\n');
      expect(field(said, 'stderr')).toBe('oops\n');
      expect(field(said, 'exitCode')).toBe(1);
      const hiddenInSession = await inSession(viaB, 'cat /workspace/secret.txt');
      expect(field(hiddenInSession, 'stderr')).toContain('No such file or directory');
      expect((await viaB('GET', `/v1/sandboxes/${id}/sessions`)).text).toContain(sid);
      expect((await viaB('DELETE', `/v1/sessions/${sid}`)).status).toBe(200);
      expect((await viaA('GET', `/v1/sessions/${sid}`)).status).toBe(404);

      // Discard, through A, drops on the node what an exec through B wrote.
      expect(field(await exec(viaB, id, 'echo scratch > /workspace/scratch.txt'), 'exitCode') ?? 0).toBe(0);
      expect((await viaA('GET', `/v1/sandboxes/${id}/changes`)).text).toContain('scratch.txt');
      expect((await viaA('POST', `/v1/sandboxes/${id}/discard`, {})).status).toBe(200);
      expect(field(await exec(viaB, id, 'test -e /workspace/scratch.txt'), 'exitCode')).toBe(1);
    });

    it('reports the sandboxes of a killed worker node lost and attaches them again on the others', async () => {
      const { manager } = cluster!;
      const victim = cluster!.nodes.find(
        (n) => n !== manager && [...made.values()].some((m) => m.node === n.hostname),
      )!;
      const onVictim = [...made].filter(([, m]) => m.node === victim.hostname).map(([id]) => id);
      const [viaA] = vias;
      // Each with a change not committed: it stays on the lost node (no checkpoint was taken).
      for (const id of onVictim)
        expect(field(await exec(viaA, id, 'echo left > /workspace/left.txt'), 'exitCode') ?? 0).toBe(0);
      const t0 = performance.now();
      await cluster!.killNode(victim);
      const reasons = async (): Promise<string[]> =>
        Promise.all(
          onVictim.map(async (id) => String(field(await viaA('GET', `/v1/sandboxes/${id}`), 'statusReason'))),
        );
      const lost = await until('every one reported lost', async () => {
        const all = await reasons();
        return all.every((r) => r.includes(`lost on node ${victim.hostname}`)) ? all : undefined;
      });
      const tLost = performance.now();
      expect(lost[0]).toContain('node-lost');
      await until('every one attached again', async () =>
        (await reasons()).every((r) => /attached again on node swarm-\d/.test(r)) ? true : undefined,
      );
      const tAttached = performance.now();
      for (const id of onVictim) {
        const node = await nodeOf(viaA, id);
        expect(node).not.toBe(victim.hostname);
        made.get(id)!.node = node!;
        // Usable again, on a surviving node, the committed codebase there and the rules in force.
        await checkRules(other(id), id, 'hello from the codebase\n');
        const committed = await exec(other(id), id, `cat /workspace/${victim.hostname}.txt`);
        expect(field(committed, 'stdout'), committed.text).toBe(`${victim.hostname}\n`);
        const left = await exec(other(id), id, 'cat /workspace/left.txt');
        expect(field(left, 'stderr'), left.text).toContain('No such file or directory');
      }
      console.log(
        `serve-swarm: killed ${victim.hostname} (${onVictim.length} sandboxes): all reported lost after ` +
          `${Math.round(tLost - t0)} ms, all attached again after ${Math.round(tAttached - t0)} ms (load ${load()})`,
      );
      // The surviving nodes' engines run all of them.
      let running = 0;
      for (const node of cluster!.nodes.filter((n) => n !== victim)) {
        const ps = await execa('docker', [
          '-H',
          node.dockerHost,
          'ps',
          '-q',
          '--filter',
          `label=${SANDBOX_ID_LABEL}`,
        ]);
        running += ps.stdout.split('\n').filter(Boolean).length;
      }
      expect(running).toBe(COUNT);
      // The others were never lost.
      const others = [...made.keys()].filter((id) => !onVictim.includes(id));
      for (const id of others)
        expect(String(field(await viaA('GET', `/v1/sandboxes/${id}`), 'statusReason'))).not.toContain('lost');
    });

    it('deletes every sandbox through either replica and leaves nothing on any node', async () => {
      await pool([...made.keys()], PARALLEL, async (id) => {
        const deleted = await other(id)('DELETE', `/v1/sandboxes/${id}`);
        expect(deleted.status, deleted.text).toBe(200);
        expect((await vias[made.get(id)!.by]('GET', `/v1/sandboxes/${id}`)).status).toBe(404);
      });
      const services = await until('no services left', async () => {
        const ls = await execa('docker', ['-H', cluster!.manager.dockerHost, 'service', 'ls', '-q']);
        return ls.stdout.trim() === '' ? ls.stdout : undefined;
      });
      expect(services).toBe('');
      const alive = cluster!.nodes.filter((n) =>
        agents.some((a) => a.node === n && a.child.exitCode === null && a.child.signalCode === null),
      );
      expect(alive.length).toBe(2);
      for (const node of alive) {
        await until(`no containers left on ${node.hostname}`, async () => {
          const ps = await execa('docker', [
            '-H',
            node.dockerHost,
            'ps',
            '-aq',
            '--filter',
            `label=${SANDBOX_ID_LABEL}`,
          ]);
          return ps.stdout.trim() === '' ? true : undefined;
        });
      }
      // Nothing of the node agent's token in what either replica wrote.
      for (const served of replicas) expect(served.output()).not.toContain(nodeToken);
      const log = await readFile(join(replicas[0]!.dataDir, 'logs', 'control.log'), 'utf8').catch(() => '');
      expect(log).not.toContain(nodeToken);

      for (const served of replicas) await served.stop();
      for (const agent of agents) await agent.stop();
      const { stateDir, nodes } = cluster!;
      await cluster!.destroy();
      const mounts = await readFile('/proc/self/mountinfo', 'utf8');
      expect(mounts.split('\n').filter((l) => l.includes(stateDir))).toEqual([]);
      const netns = (await execa('ip', ['netns', 'list'])).stdout;
      for (const node of nodes) expect(netns).not.toContain(node.netns);
      // The killed node's sandbox containers too (each has a network namespace of its own).
      expect(await processesLeftOn(nodes)).toEqual([]);
      expect(await stat(stateDir).catch(() => null)).toBeNull();
      for (const agent of agents) expect(agent.child.exitCode ?? agent.child.signalCode).not.toBeNull();
    });
  },
);
