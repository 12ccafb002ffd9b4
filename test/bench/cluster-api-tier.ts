// The API tier of `pnpm bench:cluster` (cluster.bench.ts runs it last): one `agentfense serve
// --orchestrator swarm` replica placing on the bench's Swarm, with a node agent per node over the
// replica's data directory (this host is every node's "shared filesystem"). Measured in the same run:
//   create → first exec through the replica (HTTP create with start, then exec `cat`), alternated round
//   by round with the single-host path the caller gives; and an exec round trip (`true`) through the
//   replica against the same command sent straight to the sandbox's node agent, in alternated blocks.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { exec as agentExec, randomToken, startAgent, type AgentProcess } from '../helpers/node-agent.js';
import type { SwarmCluster } from '../helpers/swarm-cluster.js';

const bin = fileURLToPath(new URL('../../packages/control/bin/agentfense.js', import.meta.url));

/** A serve replica and the node agents it routes to. */
export interface ApiTier {
  readonly url: string;
  readonly token: string;
  /** The node agent listening at `host`, and the token serve uses for it. */
  agentAt(host: string): AgentProcess | undefined;
  readonly nodeToken: string;
  /** Where each start through the replica spent its time (from its log), in the order they ended. */
  startSteps(): Promise<StartSteps[]>;
  /** The id the nodes know a sandbox by (a claimed warm placement's, or its own), from the log. */
  placementOf(sandboxId: string): Promise<string>;
  stop(): Promise<void>;
}

/** Ms since a start began: the service placed, its `ready` seen, the view attached. */
export interface StartSteps {
  readonly placedMs: number;
  readonly readyMs: number;
  readonly attachedMs: number;
}

export async function startApiTier(options: {
  readonly cluster: SwarmCluster;
  readonly dir: string;
  readonly port: number;
  /** Warm placements the replica keeps (`--swarm-warm-pool`), of this shape; none when absent. */
  readonly warm?: { readonly size: number; readonly cpuMillis: number; readonly memoryBytes: number };
}): Promise<ApiTier> {
  const { cluster, dir, port, warm } = options;
  await mkdir(dir, { recursive: true });
  const dataDir = join(dir, 'data');
  const token = randomToken();
  const nodeToken = randomToken();
  await writeFile(join(dir, 'api-token'), `${token}\n`, { mode: 0o600 });
  await writeFile(join(dir, 'node-agent-token'), `${nodeToken}\n`, { mode: 0o600 });
  const child: ChildProcess = spawn(
    process.execPath,
    [
      bin,
      'serve',
      '--listen',
      '127.0.0.1:0',
      '--grpc-listen',
      '',
      '--data',
      dataDir,
      '--token-file',
      join(dir, 'api-token'),
      '--orchestrator',
      'swarm',
      '--swarm-manager',
      cluster.manager.dockerHost,
      '--node-agent-token-file',
      join(dir, 'node-agent-token'),
      '--node-agent-port',
      String(port),
      '--sandbox-image',
      cluster.image,
      ...(warm === undefined
        ? []
        : [
            '--swarm-warm-pool',
            String(warm.size),
            '--swarm-warm-size',
            `${warm.cpuMillis}:${warm.memoryBytes}`,
          ]),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const agents: AgentProcess[] = [];
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    await Promise.all(agents.map((a) => a.stop()));
  };
  try {
    let seen = '';
    const url = await new Promise<string>((resolve, reject) => {
      const take = (chunk: Buffer): void => {
        seen += chunk.toString();
        const m = /serving (http:\/\/\S+) /.exec(seen);
        if (m !== null) resolve(m[1]!);
      };
      child.stdout?.on('data', take);
      child.stderr?.on('data', take);
      child.once('exit', (code) => reject(new Error(`serve exited (${String(code)}): ${seen}`)));
    });
    for (const [i, node] of cluster.nodes.entries()) {
      agents.push(
        await startAgent({
          stateDir: join(dir, `agent${i + 1}`),
          codebaseRoot: join(dataDir, 'codebases'),
          token: nodeToken,
          tokenFile: join(dir, `node-token-${i + 1}`),
          dockerHost: node.dockerHost,
          listen: `${node.address}:${port}`,
          netns: node.netns,
          nodeName: node.hostname,
        }),
      );
    }
    return {
      url,
      token,
      nodeToken,
      agentAt: (host) => agents[cluster.nodes.findIndex((n) => n.address === host)],
      startSteps: async () =>
        (await readFile(join(dataDir, 'logs', 'control.log'), 'utf8'))
          .split('\n')
          .filter((line) => line.includes('"steps"'))
          .map((line) => (JSON.parse(line) as { steps: StartSteps }).steps),
      placementOf: async (sandboxId) => {
        const line = (await readFile(join(dataDir, 'logs', 'control.log'), 'utf8'))
          .split('\n')
          .find((l) => l.includes('"steps"') && l.includes(`"sandboxId":"${sandboxId}"`));
        return line === undefined
          ? sandboxId
          : ((JSON.parse(line) as { placementId?: string }).placementId ?? sandboxId);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** One JSON call to the replica. */
export async function api(
  tier: ApiTier,
  method: string,
  path: string,
  body?: unknown,
): Promise<Record<string, unknown>> {
  const raw = typeof body === 'string';
  const res = await fetch(`${tier.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${tier.token}`,
      ...(body === undefined
        ? {}
        : { 'content-type': raw ? 'application/octet-stream' : 'application/json' }),
    },
    ...(body === undefined ? {} : { body: raw ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text}`);
  return text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
}

/** A command through the replica; throws unless it exits 0. */
export async function apiExec(tier: ApiTier, id: string, command: string): Promise<string> {
  const r = await api(tier, 'POST', `/v1/sandboxes/${id}/exec`, { command });
  if ((r['exitCode'] ?? r['exit_code'] ?? 0) !== 0) throw new Error(`exec ${command}: ${JSON.stringify(r)}`);
  return typeof r['stdout'] === 'string' ? r['stdout'] : '';
}

/** The same command straight to the sandbox's node agent (as serve sends it: through /bin/sh -c). */
export async function directExec(
  tier: ApiTier,
  agent: AgentProcess,
  id: string,
  command: string,
): Promise<void> {
  const r = await agentExec(agent, tier.nodeToken, id, ['/bin/sh', '-c', command]);
  if (r.exitCode !== 0) throw new Error(`direct exec ${command}: ${r.exitCode}`);
}

/** Waits until `check` passes (the replica's answers are eventually what the node agents say). */
export async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`${what}: not within 30 s`);
}
