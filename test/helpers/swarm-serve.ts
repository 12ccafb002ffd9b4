// What `serve --orchestrator swarm` needs of the test Swarm (swarm-cluster.ts, which also gives this host
// an address on the nodes' bridge): the sandbox image on every node (the base image's
// root filesystem with SANDBOX_WAIT_COMMAND as its command), and one `agentfense node` per node, in the
// node's network namespace, listening on the node's address and talking to the node's own engine.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { SANDBOX_WAIT_COMMAND } from '@agentfense/node-agent';
import { bin } from './http-fixture.js';
import type { SwarmCluster, SwarmNodeProcess } from './swarm-cluster.js';

/** The cached root filesystem of the base image (scripts/setup or a docker test run makes it). */
export async function baseTarball(): Promise<string | undefined> {
  const dir = process.env['AF_IMAGE_CACHE_DIR'] ?? '/var/cache/agentfense';
  const name = (await readdir(dir).catch(() => [] as string[])).find((f) =>
    /^agentfense-base-.*\.tar$/.test(f),
  );
  return name === undefined ? undefined : join(dir, name);
}

/** The sandbox image on every node: the base root filesystem, its command the wait for af-init. */
export async function loadSandboxImage(cluster: SwarmCluster, tarball: string, image: string): Promise<void> {
  const changes = [
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    'WORKDIR /',
    'USER 1000:1000',
    `CMD ${JSON.stringify(SANDBOX_WAIT_COMMAND)}`,
  ];
  await Promise.all(
    cluster.nodes.map((node) =>
      execa('docker', [
        '-H',
        node.dockerHost,
        'import',
        ...changes.flatMap((c) => ['--change', c]),
        tarball,
        image,
      ]),
    ),
  );
}

/** One running `agentfense node`. */
export interface NodeAgentProcess {
  readonly node: SwarmNodeProcess;
  readonly child: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

/** The load average, for the measured figures a test logs (the machine is shared). */
export const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/** Runs `fn` over `items`, at most `n` at a time. */
export async function pool<T>(items: readonly T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: n }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
    }),
  );
}

/** Polls `check` until it gives a value; throws naming `what` after `timeoutMs`. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 120_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

/**
 * Starts a node agent in each node's network namespace, on `<node address>:<port>`. Its state lives
 * under the cluster's directory, so `destroy` unmounts what a killed node's agent left.
 */
export async function startNodeAgents(
  cluster: SwarmCluster,
  options: {
    readonly token: string;
    readonly dir: string;
    readonly codebaseRoot: string;
    readonly port: number;
  },
): Promise<NodeAgentProcess[]> {
  const tokenFile = join(options.dir, 'node-agent-token');
  await writeFile(tokenFile, `${options.token}\n`, { mode: 0o600 });
  const agents: NodeAgentProcess[] = [];
  try {
    const stateRoot = cluster.stateDir;
    for (const node of cluster.nodes) agents.push(await startOne(node, tokenFile, { ...options, stateRoot }));
  } catch (err) {
    for (const agent of agents) await agent.stop();
    throw err;
  }
  return agents;
}

async function startOne(
  node: SwarmNodeProcess,
  tokenFile: string,
  options: {
    readonly dir: string;
    readonly stateRoot: string;
    readonly codebaseRoot: string;
    readonly port: number;
  },
): Promise<NodeAgentProcess> {
  // nsenter execs node itself: the child's pid is the agent's.
  const child = spawn(
    'nsenter',
    [
      `--net=/run/netns/${node.netns}`,
      '--',
      process.execPath,
      bin,
      'node',
      '--listen',
      `${node.address}:${options.port}`,
      '--token-file',
      tokenFile,
      '--state',
      join(options.stateRoot, `state-${node.hostname}`),
      '--codebases',
      options.codebaseRoot,
      '--docker-host',
      node.dockerHost,
      '--node-name',
      node.hostname,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes('node agent on ')) resolve();
    });
    child.once('exit', (code) =>
      reject(new Error(`agentfense node on ${node.hostname} exited (${String(code)}): ${stderr}`)),
    );
  });
  return {
    node,
    child,
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
