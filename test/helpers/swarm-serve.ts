// What `serve --orchestrator swarm` needs of the test Swarm (swarm-cluster.ts): this host reaching the
// nodes' addresses (an address on the cluster's bridge), the sandbox image on every node (the base image's
// root filesystem with SANDBOX_WAIT_COMMAND as its command), and one `agentfense node` per node, in the
// node's network namespace, listening on the node's address and talking to the node's own engine.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
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

/**
 * Gives this host an address on the cluster's bridge (the nodes' subnet, .254), so a process here (serve)
 * reaches the node agents on the nodes' addresses. The bridge goes with the cluster.
 */
export async function reachNodes(cluster: SwarmCluster): Promise<string> {
  const { netns, address } = cluster.manager;
  const bridge = netns.replace(/n\d+$/, 'b');
  const hostAddress = `${address.split('.').slice(0, 3).join('.')}.254`;
  // replace: the cluster may have given this host the address already.
  await execa('ip', ['addr', 'replace', `${hostAddress}/24`, 'dev', bridge]);
  return hostAddress;
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

/** Starts a node agent in each node's network namespace, on `<node address>:<port>`. */
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
    for (const node of cluster.nodes) agents.push(await startOne(node, tokenFile, options));
  } catch (err) {
    for (const agent of agents) await agent.stop();
    throw err;
  }
  return agents;
}

async function startOne(
  node: SwarmNodeProcess,
  tokenFile: string,
  options: { readonly dir: string; readonly codebaseRoot: string; readonly port: number },
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
      join(options.dir, `state-${node.hostname}`),
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
