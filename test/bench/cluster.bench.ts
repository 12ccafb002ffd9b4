// Cluster benchmark (`pnpm bench:cluster`, README.md beside it): the cluster path (Swarm adapter + node
// agent on a three-node Swarm of dockerd network namespaces) against the single-host path (ControlPlane
// with the Docker runtime on this host's engine), measured in the same run, alternated round by round:
//   1. create → first exec result: `place` → `locate` says running → attach through that node's agent →
//      `cat` through it, against createSandbox → startSandbox → run `cat`, one sandbox at a time, paced;
//   2. an exec round trip (`true`): through the node agent's HTTP API, against the control plane's run on a
//      local Docker sandbox, in alternated blocks;
//   3. memory per attached sandbox on a node: the FUSE worker's PSS and the container's cgroup usage
//      (less inactive file cache, as `docker stats`), with the agent's own PSS;
//   4. the API tier (cluster-api-tier.ts): create → first exec through a `serve --orchestrator swarm`
//      replica against the single-host path, and an exec round trip through the replica against the same
//      command sent straight to the node agent. BENCH_ONLY=api runs it alone, BENCH_API=1 after 1-3.
// Run as root under flock /tmp/af-docker.lock and /tmp/af-bench.lock. BENCH_ROUNDS (8), BENCH_EXEC_ROUNDS
// (100), BENCH_MEMORY_SANDBOXES (6), BENCH_WARM_POOL (2: the replica's --swarm-warm-pool). Everything
// made is removed on success, failure and SIGINT/SIGTERM.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { execa } from 'execa';
import { ControlPlane } from '@agentfense/control';
import { SwarmOrchestrator, swarmApiFrom } from '@agentfense/orchestrator/swarm';
import {
  createEngineApi,
  ensureBaseImage,
  probeEngine,
  startDockerd,
  type StartedDockerd,
} from '@agentfense/runtime-docker';
import { call, exec } from '../helpers/node-agent.js';
import { api, apiExec, directExec, startApiTier, type ApiTier } from './cluster-api-tier.js';
import { startClusterAgents, type ClusterAgents, type NodeAgentOnNode } from '../helpers/swarm-agents.js';
import { createSwarmCluster, type SwarmCluster } from '../helpers/swarm-cluster.js';

const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 8);
const EXEC_ROUNDS = Number(process.env['BENCH_EXEC_ROUNDS'] ?? 100);
const MEMORY_SANDBOXES = Number(process.env['BENCH_MEMORY_SANDBOXES'] ?? 6);
/** Warm placements the API tier's replica keeps (`serve --swarm-warm-pool`); 0 for none. */
const WARM_POOL = Number(process.env['BENCH_WARM_POOL'] ?? 2);
const EXEC_BLOCK = 10;
const ONLY_API = process.env['BENCH_ONLY'] === 'api';
/** The API tier (step 4) runs only when asked for: BENCH_ONLY=api, or BENCH_API=1 after steps 1-3. */
const WITH_API = ONLY_API || process.env['BENCH_API'] === '1';
const PACE_MS = 1000;
const LOCATE_POLL_MS = 100;
const NODE_LABEL = 'agentfense.node-agent';
const AGENT_PORT = 7300;
/** Targets (the issue's): create → first exec ≤ 2× single-host; an exec round trip ≤ 1.5× direct. */
const CREATE_TARGET_X = 2;
const EXEC_TARGET_X = 1.5;
const RULES = [
  { pattern: '**', permission: 'write' },
  { pattern: 'secret.txt', permission: 'none' },
] as const;
const RESOURCES = { cpuMillis: 500, memoryBytes: 512 * 2 ** 20 };

const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const p50 = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(sorted.length / 2) - 1)]!;
};
const ms = (n: number): string => `${n.toFixed(1)} ms`;
const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

async function pss(pid: number): Promise<number> {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  return Number(/^Pss:\s+(\d+) kB/m.exec(text)?.[1] ?? 0) * 1024;
}

/**
 * A container's memory as `docker stats` counts it: its cgroup's usage less the inactive file cache
 * (cgroup v1's memory controller or v2's unified hierarchy, whichever the host has).
 */
async function containerMemory(pid: number): Promise<number> {
  const lines = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n');
  const v1 = lines.find((l) => /^\d+:memory:/.test(l));
  const [dir, usageFile, inactiveKey] =
    v1 === undefined
      ? [
          `/sys/fs/cgroup${lines.find((l) => l.startsWith('0::'))!.slice(3)}`,
          'memory.current',
          'inactive_file',
        ]
      : [`/sys/fs/cgroup/memory${v1.split(':')[2]}`, 'memory.usage_in_bytes', 'total_inactive_file'];
  const usage = Number(await readFile(join(dir, usageFile), 'utf8'));
  const stat = await readFile(join(dir, 'memory.stat'), 'utf8');
  const inactive = Number(new RegExp(`^${inactiveKey} (\\d+)$`, 'm').exec(stat)?.[1] ?? 0);
  return usage - inactive;
}

let root: string | undefined;
let cluster: SwarmCluster | undefined;
let agents: ClusterAgents | undefined;
let cp: ControlPlane | undefined;
let localEngine: StartedDockerd | undefined;
let apiTier: ApiTier | undefined;
let closing: Promise<void> | undefined;

function cleanup(): Promise<void> {
  closing ??= (async () => {
    await cp?.close().catch((err: unknown) => console.error('closing the control plane failed:', err));
    await apiTier?.stop();
    await agents?.stop();
    await cluster?.destroy();
    await localEngine?.stop();
    if (root !== undefined) await rm(root, { recursive: true, force: true });
  })();
  return closing;
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    void cleanup().then(() => process.exit(130));
  });
}

try {
  root = await mkdtemp(join(tmpdir(), 'af-bench-cluster-'));
  const source = join(root, 'codebase');
  await mkdir(source);
  await writeFile(join(source, 'readme.txt'), 'hello from the codebase\n');
  await writeFile(join(source, 'secret.txt'), 'the secret\n');

  // The single-host side: this host's engine (DOCKER_HOST or docker's socket), else a private dockerd.
  const probe = await probeEngine();
  const dockerHost = probe.ok
    ? probe.dockerHost
    : (localEngine = await startDockerd({
        stateDir: process.env['AF_DOCKERD_STATE_DIR'] ?? '/var/lib/agentfense/test-dockerd',
      })).dockerHost;
  await ensureBaseImage({
    dockerHost,
    cacheDir: process.env['AF_IMAGE_CACHE_DIR'] ?? '/var/cache/agentfense',
  });
  process.env['DOCKER_HOST'] = dockerHost;
  cp = await ControlPlane.open({ dataDir: join(root, 'data'), reapIntervalMs: 0, logLevel: 'error' });
  const { id: codebaseId } = await cp.linkCodebase({ path: source });
  const policy = {
    codebaseId,
    rules: RULES.map((r) => ({ ...r })),
    // The Docker runtime's defaults (its pool of idle containers serves them): what a user gets.
    runtime: 'docker',
  };

  // The cluster side.
  const t0 = performance.now();
  cluster = await createSwarmCluster({ nodes: 3, nodeLabel: NODE_LABEL, heartbeat: '1s' });
  agents = await startClusterAgents(cluster, { port: AGENT_PORT, codebase: source });
  const swarm = createEngineApi(cluster.manager.dockerHost);
  const adapter = new SwarmOrchestrator({
    api: swarmApiFrom(swarm),
    nodeAgent: { port: AGENT_PORT, nodeLabel: NODE_LABEL },
    restartDelayMs: 200,
  });
  console.log(`cluster of 3 nodes with their agents up in ${ms(performance.now() - t0)} (load ${load()})`);
  const { token } = agents;

  /** When each step of the last placeAndAttach ended (ms since it began). */
  let steps = { placed: 0, located: 0, attached: 0 };
  /** place → located → attached through the node's agent; the agent it is attached on. */
  const placeAndAttach = async (sandboxId: string): Promise<NodeAgentOnNode> => {
    const began = performance.now();
    await adapter.place({ sandboxId, image: cluster!.image, resources: RESOURCES });
    steps = { placed: performance.now() - began, located: 0, attached: 0 };
    const deadline = Date.now() + 60_000;
    for (;;) {
      const where = await adapter.locate(sandboxId).catch(() => undefined);
      const on = where === undefined ? undefined : agents!.at(where.nodeAgent.host);
      if (on !== undefined) {
        if (steps.located === 0) steps.located = performance.now() - began;
        const r = await call(on.agent, token, 'POST', '/v1/sandboxes', {
          sandboxId,
          codebasePath: on.codebase,
          rules: RULES,
        });
        if (r.status === 201) {
          steps.attached = performance.now() - began;
          return on;
        }
        if (r.status !== 404) throw new Error(`attach answered ${r.status}: ${r.text}`);
      }
      if (Date.now() > deadline) throw new Error(`${sandboxId} was not attached within 60 s`);
      await sleep(LOCATE_POLL_MS);
    }
  };
  const removeCluster = async (sandboxId: string, on: NodeAgentOnNode): Promise<void> => {
    await call(on.agent, token, 'DELETE', `/v1/sandboxes/${sandboxId}?dropDelta=true`);
    await adapter.remove(sandboxId);
  };
  const must = (r: { exitCode: number | null; stdout: string | Buffer }, what: string): void => {
    if (r.exitCode !== 0 || !r.stdout.toString().startsWith('hello')) {
      throw new Error(`${what} answered ${r.exitCode}: ${r.stdout.toString()}`);
    }
  };

  const clusterSteps: (typeof steps)[] = [];
  const clusterRound = async (): Promise<number> => {
    const sandboxId = `sb_${randomUUID()}`;
    const started = performance.now();
    const on = await placeAndAttach(sandboxId);
    must(await exec(on.agent, token, sandboxId, ['cat', '/workspace/readme.txt']), 'cluster first exec');
    const elapsed = performance.now() - started;
    clusterSteps.push(steps);
    await removeCluster(sandboxId, on);
    return elapsed;
  };
  const localRound = async (): Promise<number> => {
    const started = performance.now();
    const { id } = await cp!.createSandbox(policy);
    await cp!.startSandbox(id);
    must(await cp!.run(id, ['cat', '/workspace/readme.txt']), 'local first exec');
    const elapsed = performance.now() - started;
    await cp!.destroySandbox(id);
    return elapsed;
  };

  if (!ONLY_API) {
    // 1. create → first exec, one warm-up round each, then alternated.
    await localRound();
    await clusterRound();
    const local: number[] = [];
    const remote: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      await sleep(PACE_MS);
      local.push(await localRound());
      await sleep(PACE_MS);
      remote.push(await clusterRound());
    }
    const createX = p50(remote) / p50(local);
    console.log(
      `create → first exec: single host (ControlPlane, Docker runtime) p50 ${ms(p50(local))}; ` +
        `cluster (Swarm adapter + node agent) p50 ${ms(p50(remote))} = ${createX.toFixed(2)}× ` +
        `(target ≤ ${CREATE_TARGET_X}×: ${createX <= CREATE_TARGET_X ? 'ok' : 'OVER TARGET'}; ${ROUNDS} rounds each, load ${load()})`,
    );
    const measured = clusterSteps.slice(1);
    console.log(
      `  cluster steps (p50, since place): service created ${ms(p50(measured.map((x) => x.placed)))}, ` +
        `running and located ${ms(p50(measured.map((x) => x.located)))}, attached ${ms(p50(measured.map((x) => x.attached)))}`,
    );

    // 2. exec round trip, alternated blocks.
    const localId = (await cp.createSandbox(policy)).id;
    await cp.startSandbox(localId);
    const remoteId = `sb_${randomUUID()}`;
    const remoteOn = await placeAndAttach(remoteId);
    const localExec: number[] = [];
    const remoteExec: number[] = [];
    for (let i = 0; i < EXEC_BLOCK; i++) {
      await cp.run(localId, ['true']);
      await exec(remoteOn.agent, token, remoteId, ['true']);
    }
    for (let done = 0; done < EXEC_ROUNDS; done += EXEC_BLOCK) {
      for (let i = 0; i < EXEC_BLOCK; i++) {
        const s = performance.now();
        if ((await cp.run(localId, ['true'])).exitCode !== 0) throw new Error('local exec failed');
        localExec.push(performance.now() - s);
      }
      for (let i = 0; i < EXEC_BLOCK; i++) {
        const s = performance.now();
        if ((await exec(remoteOn.agent, token, remoteId, ['true'])).exitCode !== 0)
          throw new Error('exec failed');
        remoteExec.push(performance.now() - s);
      }
    }
    const execX = p50(remoteExec) / p50(localExec);
    console.log(
      `exec \`true\` round trip: local (ControlPlane run, Docker runtime) p50 ${ms(p50(localExec))}; ` +
        `through the node agent (HTTP over the node network) p50 ${ms(p50(remoteExec))} = ${execX.toFixed(2)}× ` +
        `(target ≤ ${EXEC_TARGET_X}× for the API replica path, which is not built: this is the node-agent hop; ` +
        `${EXEC_ROUNDS} each, load ${load()})`,
    );
    await cp.destroySandbox(localId);
    await removeCluster(remoteId, remoteOn);

    // 3. memory per attached sandbox: each attached and idle after one command.
    const attached: { id: string; on: NodeAgentOnNode }[] = [];
    for (let i = 0; i < MEMORY_SANDBOXES; i++) {
      const id = `sb_${randomUUID()}`;
      const on = await placeAndAttach(id);
      attached.push({ id, on });
      must(await exec(on.agent, token, id, ['cat', '/workspace/readme.txt']), 'memory sandbox exec');
    }
    let workers = 0;
    let containers = 0;
    for (const { id, on } of attached) {
      const workerPid = Number(
        (await readFile(join(on.stateDir, 'sandboxes', id, 'worker.pid'), 'utf8')).split(' ')[0],
      );
      workers += await pss(workerPid);
      const ps = await execa('docker', [
        '-H',
        on.node.dockerHost,
        'ps',
        '-q',
        '--filter',
        `label=agentfense.dev/sandbox-id=${id}`,
      ]);
      const pid = (
        await execa('docker', [
          '-H',
          on.node.dockerHost,
          'inspect',
          '--format',
          '{{.State.Pid}}',
          ps.stdout.trim(),
        ])
      ).stdout.trim();
      containers += await containerMemory(Number(pid));
    }
    let agentsPss = 0;
    for (const { agent } of agents.agents) agentsPss += await pss(agent.child.pid!);
    const n = attached.length;
    console.log(
      `memory per attached sandbox (${n} over 3 nodes): FUSE worker ${mib(workers / n)} PSS + container ` +
        `${mib(containers / n)} (its cgroup, less inactive file cache) = ${mib((workers + containers) / n)}; ` +
        `each node agent ${mib(agentsPss / agents.agents.length)} PSS (load ${load()})`,
    );
    for (const { id, on } of attached) await removeCluster(id, on);
  }

  if (WITH_API) {
    // 4. The API tier: a serve replica over node agents that read its data directory (the per-node
    //    codebase copies' agents give way to them on the same port).
    await agents.stop();
    apiTier = await startApiTier({
      cluster,
      dir: join(root, 'api'),
      port: AGENT_PORT,
      ...(WARM_POOL > 0 ? { warm: { size: WARM_POOL, ...RESOURCES } } : {}),
    });
    const tier = apiTier;
    const cb = (await api(tier, 'POST', '/v1/codebases', { name: 'bench' }))['id'] as string;
    await api(tier, 'PUT', `/v1/codebases/${cb}/files/readme.txt`, 'hello from the codebase\n');
    await api(tier, 'PUT', `/v1/codebases/${cb}/files/secret.txt`, 'the secret\n');
    const create = {
      codebase_id: cb,
      permissions: RULES,
      resources: { memory_bytes: RESOURCES.memoryBytes, cpu_quota: RESOURCES.cpuMillis * 100 },
      start: true,
    };
    const apiRound = async (): Promise<number> => {
      const started = performance.now();
      const id = (await api(tier, 'POST', '/v1/sandboxes', create))['id'] as string;
      must({ exitCode: 0, stdout: await apiExec(tier, id, 'cat /workspace/readme.txt') }, 'API first exec');
      const elapsed = performance.now() - started;
      await api(tier, 'DELETE', `/v1/sandboxes/${id}`);
      return elapsed;
    };
    await localRound();
    await apiRound();
    const localCreate: number[] = [];
    const apiCreate: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      await sleep(PACE_MS);
      localCreate.push(await localRound());
      await sleep(PACE_MS);
      apiCreate.push(await apiRound());
    }
    const apiCreateX = p50(apiCreate) / p50(localCreate);
    console.log(
      `create → first exec through the API tier: single host p50 ${ms(p50(localCreate))}; ` +
        `serve --orchestrator swarm replica p50 ${ms(p50(apiCreate))} = ${apiCreateX.toFixed(2)}× ` +
        `(target ≤ ${CREATE_TARGET_X}×: ${apiCreateX <= CREATE_TARGET_X ? 'ok' : 'OVER TARGET'}; ${ROUNDS} rounds each, ` +
        `warm pool ${WARM_POOL}, load ${load()})`,
    );
    // The replica's own split of its starts (its log), the warm-up round left out.
    const steps = (await tier.startSteps()).slice(1);
    console.log(
      `  the replica's start, p50 since it began: service placed ${ms(p50(steps.map((s) => s.placedMs)))}, ` +
        `ready seen ${ms(p50(steps.map((s) => s.readyMs)))}, attached ${ms(p50(steps.map((s) => s.attachedMs)))}`,
    );

    const held = (await api(tier, 'POST', '/v1/sandboxes', create))['id'] as string;
    // The node knows it by its placement's id (a warm placement's when it was claimed from the pool).
    const onNode = await tier.placementOf(held);
    const where = await adapter.locate(onNode);
    const direct = where === undefined ? undefined : tier.agentAt(where.nodeAgent.host);
    if (direct === undefined) throw new Error(`no node agent found for ${held}`);
    const viaReplica: number[] = [];
    const viaAgent: number[] = [];
    for (let i = 0; i < EXEC_BLOCK; i++) {
      await apiExec(tier, held, 'true');
      await directExec(tier, direct, onNode, 'true');
    }
    for (let done = 0; done < EXEC_ROUNDS; done += EXEC_BLOCK) {
      for (let i = 0; i < EXEC_BLOCK; i++) {
        const s = performance.now();
        await directExec(tier, direct, onNode, 'true');
        viaAgent.push(performance.now() - s);
      }
      for (let i = 0; i < EXEC_BLOCK; i++) {
        const s = performance.now();
        await apiExec(tier, held, 'true');
        viaReplica.push(performance.now() - s);
      }
    }
    const hopX = p50(viaReplica) / p50(viaAgent);
    console.log(
      `exec \`true\` round trip: straight to the node agent p50 ${ms(p50(viaAgent))}; through the serve replica ` +
        `p50 ${ms(p50(viaReplica))} = ${hopX.toFixed(2)}× (target ≤ ${EXEC_TARGET_X}×: ` +
        `${hopX <= EXEC_TARGET_X ? 'ok' : 'OVER TARGET'}; ${EXEC_ROUNDS} each, load ${load()})`,
    );
    await api(tier, 'DELETE', `/v1/sandboxes/${held}`);
  }
  await swarm.close();
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await cleanup();
}
