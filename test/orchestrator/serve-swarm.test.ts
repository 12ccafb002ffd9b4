// `agentfense serve --orchestrator swarm` end to end: a two-node Swarm in network namespaces
// (swarm-cluster.ts), a node agent on each node (swarm-serve.ts), one private PostgreSQL and two serve
// replicas over it, both placing through the Swarm manager. A sandbox created and started through replica
// A runs in a container Swarm put on one node, and is used through replica B (a session opened through A
// and used through B, discard through A): exec (rules enforced inside
// the container by the view), changes, diff, commit; then deleted through B, which removes its service.
// Two nodes, not three: routing needs a node that is not the manager, and the node-loss path is the
// adapter's own test (test/orchestrator/swarm.test.ts). Skipped with the reason only on a host without
// docker.io, root, PostgreSQL or the base image's root filesystem; AF_REQUIRE_DOCKER=1 makes that a failure.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_ID_LABEL } from '@agentfense/orchestrator/swarm';
import { client, launchServer, tokenFile, type Answer, type Served } from '../helpers/http-fixture.js';
import { startPostgres, type PostgresCluster } from '../helpers/postgres.js';
import { createSwarmCluster, swarmPrerequisiteMissing, type SwarmCluster } from '../helpers/swarm-cluster.js';
import {
  baseTarball,
  loadSandboxImage,
  startNodeAgents,
  type NodeAgentProcess,
} from '../helpers/swarm-serve.js';

const NODE_LABEL = 'agentfense.node-agent';
const IMAGE = 'agentfense/sandbox:swarm-test';
const PORT = 7300;
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

describe.skipIf(missing !== undefined)('serve placing sandboxes on a Swarm', { timeout: 300_000 }, () => {
  let cluster: SwarmCluster | undefined;
  let postgres: PostgresCluster | undefined;
  let agents: NodeAgentProcess[] = [];
  const replicas: Served[] = [];
  let dir: string | undefined;
  const nodeToken = randomBytes(24).toString('hex');

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'af-serve-swarm-'));
    postgres = await startPostgres();
    cluster = await createSwarmCluster({ nodes: 2, nodeLabel: NODE_LABEL, heartbeat: '1s' });
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
      '--token-file',
      apiToken,
      '--orchestrator',
      'swarm',
      '--swarm-manager',
      cluster.manager.dockerHost,
      '--node-agent-token-file',
      join(dir, 'node-agent-token'),
      '--node-agent-port',
      String(PORT),
      '--sandbox-image',
      IMAGE,
    ];
    const env = { ...process.env, AGENTFENSE_DATABASE: postgres.url } as Record<string, string>;
    replicas.push(await launchServer(args, dataDir, { env }));
    replicas.push(await launchServer(args, dataDir, { env }));
  }, 240_000);

  afterAll(async () => {
    for (const served of replicas) await served.stop();
    for (const agent of agents) await agent.stop();
    await cluster?.destroy();
    await postgres?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  }, 120_000);

  it('created through one replica, used and deleted through the other, in a container on a node', async () => {
    const [a, b] = replicas as [Served, Served];
    const viaA = client(a.url, a.token);
    const viaB = client(b.url, b.token);
    const cb = field(await viaA('POST', '/v1/codebases', { name: 'app' }), 'id') as string;
    for (const [path, text] of [
      ['readme.txt', 'hello from the codebase\n'],
      ['secret.txt', 'the secret\n'],
      ['docs/guide.txt', 'read only\n'],
    ] as const) {
      expect((await viaA('PUT', `/v1/codebases/${cb}/files/${path}`, text)).status).toBe(200);
    }
    const made = await viaA('POST', '/v1/sandboxes', {
      codebase_id: cb,
      permissions,
      resources: { memory_bytes: 256 * 1024 * 1024, cpu_quota: 20_000 },
      start: true,
    });
    expect(made.status, made.text).toBe(200);
    const id = field(made, 'id') as string;
    const status = await viaB('GET', `/v1/sandboxes/${id}`);
    expect(field(status, 'status'), status.text).toMatch(/running/i);
    const node = /placed on node (swarm-\d)/.exec(String(field(status, 'statusReason')))?.[1];
    expect(node, status.text).toBeDefined();

    // Its container runs on that node's own engine, with af-init as pid 1 and the view at /workspace.
    const host = cluster!.nodes.find((n) => n.hostname === node)!;
    const ps = await execa('docker', [
      '-H',
      host.dockerHost,
      'ps',
      '-q',
      '--filter',
      `label=${SANDBOX_ID_LABEL}=${id}`,
    ]);
    expect(ps.stdout.trim()).not.toBe('');
    const exec = (command: string) => viaB('POST', `/v1/sandboxes/${id}/exec`, { command });
    const init = await exec('cat /proc/1/comm /workspace/readme.txt; hostname');
    expect(init.status, init.text).toBe(200);
    expect(field(init, 'stdout')).toBe('af-init\nhello from the codebase\nsandbox\n');

    // The rules, enforced inside the container: hidden is ENOENT, read-only is EACCES.
    const hidden = await exec('cat /workspace/secret.txt');
    expect(field(hidden, 'exitCode')).toBe(1);
    expect(field(hidden, 'stderr')).toContain('No such file or directory');
    const denied = await exec('echo x > /workspace/docs/guide.txt');
    expect(field(denied, 'exitCode') ?? 0).not.toBe(0);
    expect(field(denied, 'stderr')).toContain('Permission denied');

    const wrote = await exec('echo changed > /workspace/readme.txt');
    expect(field(wrote, 'exitCode') ?? 0).toBe(0);
    const changes = await viaB('GET', `/v1/sandboxes/${id}/changes`);
    expect(changes.text).toContain('readme.txt');
    const diff = await viaA('GET', `/v1/sandboxes/${id}/diff`);
    expect(field(diff, 'diff')).toContain('+changed');
    const commit = await viaB('POST', `/v1/sandboxes/${id}/commit`, {});
    expect(commit.status, commit.text).toBe(200);
    // The commit reached the codebase on the shared filesystem: the next sandbox's view shows it.
    const files = await viaA('GET', `/v1/codebases/${cb}/files/readme.txt`);
    expect(files.text).toBe('changed\n');

    // A session opened through A and used through B: its shell runs on the node (af-init starts it), so
    // `cd` and variables carry from a command sent through one replica to the next through the other.
    const opened = await viaA('POST', `/v1/sandboxes/${id}/sessions`, { env: { GREETING: 'hi' } });
    expect(opened.status, opened.text).toBe(200);
    const sid = field(opened, 'id') as string;
    const inSession = (via: typeof viaA, command: string) =>
      via('POST', `/v1/sessions/${sid}/exec`, { command });
    const moved = await inSession(viaB, 'cd /workspace/docs && export SEEN=yes');
    expect(field(moved, 'exitCode'), moved.text).toBe(0);
    const said = await inSession(viaA, 'echo "$GREETING $SEEN $(pwd)"; cat guide.txt; echo oops >&2; false');
    expect(said.status, said.text).toBe(200);
    expect(field(said, 'stdout')).toBe('hi yes /workspace/docs\nread only\n');
    expect(field(said, 'stderr')).toBe('oops\n');
    expect(field(said, 'exitCode')).toBe(1);
    // The rules hold in the session's shell too.
    const hiddenInSession = await inSession(viaB, 'cat /workspace/secret.txt');
    expect(field(hiddenInSession, 'stderr')).toContain('No such file or directory');
    expect((await viaB('GET', `/v1/sandboxes/${id}/sessions`)).text).toContain(sid);
    expect((await viaA('GET', `/v1/sessions/${sid}`)).status).toBe(200);
    expect((await viaB('DELETE', `/v1/sessions/${sid}`)).status).toBe(200);
    expect((await viaA('GET', `/v1/sessions/${sid}`)).status).toBe(404);

    // Discard, through A, drops on the node what an exec through B wrote.
    expect(field(await exec('echo scratch > /workspace/scratch.txt'), 'exitCode') ?? 0).toBe(0);
    expect((await viaA('GET', `/v1/sandboxes/${id}/changes`)).text).toContain('scratch.txt');
    const discarded = await viaA('POST', `/v1/sandboxes/${id}/discard`, {});
    expect(discarded.status, discarded.text).toBe(200);
    expect((await viaB('GET', `/v1/sandboxes/${id}/changes`)).text).not.toContain('scratch.txt');
    expect(field(await exec('test -e /workspace/scratch.txt'), 'exitCode')).toBe(1);

    const deleted = await viaB('DELETE', `/v1/sandboxes/${id}`);
    expect(deleted.status, deleted.text).toBe(200);
    expect((await viaA('GET', `/v1/sandboxes/${id}`)).status).toBe(404);
    // The service is gone from the Swarm and the container from its node.
    for (let i = 0; i < 50; i++) {
      const left = await execa('docker', [
        '-H',
        host.dockerHost,
        'ps',
        '-aq',
        '--filter',
        `label=${SANDBOX_ID_LABEL}=${id}`,
      ]);
      if (left.stdout.trim() === '') break;
      await sleep(200);
    }
    const services = await execa('docker', ['-H', cluster!.manager.dockerHost, 'service', 'ls', '-q']);
    expect(services.stdout.trim()).toBe('');
    const left = await execa('docker', [
      '-H',
      host.dockerHost,
      'ps',
      '-aq',
      '--filter',
      `label=${SANDBOX_ID_LABEL}=${id}`,
    ]);
    expect(left.stdout.trim()).toBe('');
    // Nothing of the node agent's token in what either replica wrote.
    for (const served of replicas) expect(served.output()).not.toContain(nodeToken);
    const log = await readFile(join(a.dataDir, 'logs', 'control.log'), 'utf8').catch(() => '');
    expect(log).not.toContain(nodeToken);
  });
});
