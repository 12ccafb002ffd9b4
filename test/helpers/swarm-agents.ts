// A node agent on every node of a test Swarm (test/helpers/swarm-cluster.ts), as an operator installs
// one: `agentfense node` in the node's network namespace, listening on the node's Swarm address (where the
// adapter's `locate` sends the API tier), on the node's own dockerd, with its own state directory and
// codebase root (holding a copy of the test codebase: the shared blob store is not built), and a token.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { randomToken, startAgent, type AgentProcess } from './node-agent.js';
import type { SwarmCluster, SwarmNodeProcess } from './swarm-cluster.js';

export interface NodeAgentOnNode {
  readonly node: SwarmNodeProcess;
  readonly agent: AgentProcess;
  readonly stateDir: string;
  /** The codebase on this node, inside its agent's codebase root. */
  readonly codebase: string;
}

export interface ClusterAgents {
  readonly token: string;
  readonly port: number;
  readonly agents: readonly NodeAgentOnNode[];
  /** The agent that listens at `host` (what `locate` answers), or undefined. */
  at(host: string): NodeAgentOnNode | undefined;
  /** SIGTERM every agent still running and wait (each detaches its sandboxes). Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts one agent per node. `codebase` is copied to `<state>/n<i>/codebases/app` on each. Their state
 * lives under the cluster's directory, so the cluster's `destroy` unmounts and removes whatever a killed
 * agent left.
 */
export async function startClusterAgents(
  cluster: SwarmCluster,
  options: { readonly port: number; readonly codebase: string },
): Promise<ClusterAgents> {
  const token = randomToken();
  const agents: NodeAgentOnNode[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(agents.map((a) => a.agent.stop()));
  };
  try {
    for (const [i, node] of cluster.nodes.entries()) {
      const dir = join(cluster.stateDir, `agent${i + 1}`);
      const codebaseRoot = join(dir, 'codebases');
      const codebase = join(codebaseRoot, 'app');
      await mkdir(codebaseRoot, { recursive: true, mode: 0o755 });
      await execa('cp', ['-a', options.codebase, codebase]);
      const stateDir = join(dir, 'state');
      const agent = await startAgent({
        stateDir,
        codebaseRoot,
        token,
        tokenFile: join(dir, 'token'),
        dockerHost: node.dockerHost,
        listen: `${node.address}:${options.port}`,
        netns: node.netns,
        nodeName: node.hostname,
      });
      agents.push({ node, agent, stateDir, codebase });
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    token,
    port: options.port,
    agents,
    at: (host) => agents.find((a) => a.node.address === host),
    stop,
  };
}
