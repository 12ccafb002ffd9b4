// `serve --orchestrator swarm …`: the flags that make serve place its sandboxes on a cluster, read and
// checked before anything opens, as the control plane's `placement` option.
import type { Command } from 'commander';
import { InvalidArgumentError } from '@agentfense/protocol';
import type { PlacementOptions } from '../placement/options.js';

export interface PlacementFlags {
  readonly orchestrator?: string;
  readonly swarmManager?: string;
  readonly nodeAgentTokenFile?: string;
  readonly nodeAgentPort: string;
  readonly sandboxImage: string;
  readonly swarmNodeLabel: string;
}

/** The node label an operator sets where a node agent runs (deploy/swarm/node-agent.service). */
export const DEFAULT_NODE_LABEL = 'agentfense.node-agent';
export const DEFAULT_SANDBOX_IMAGE = 'agentfense/sandbox:latest';

export function addPlacementFlags(command: Command): Command {
  return command
    .option(
      '--orchestrator <name>',
      'place sandboxes on cluster nodes through this orchestrator ("swarm") and call the node agent where each one runs; default: run every sandbox on this host',
    )
    .option(
      '--swarm-manager <engine>',
      "with --orchestrator swarm: a Swarm manager's Engine API (unix:///run/docker.sock, tcp://host:2376)",
    )
    .option(
      '--node-agent-token-file <file>',
      'with --orchestrator: the file holding the token every node agent takes (agentfense node --token-file)',
    )
    .option('--node-agent-port <port>', "with --orchestrator: the node agents' port on their nodes", '7300')
    .option(
      '--sandbox-image <image>',
      "with --orchestrator: the sandbox containers' image, present on every node (its entrypoint waits for af-init)",
      DEFAULT_SANDBOX_IMAGE,
    )
    .option(
      '--swarm-node-label <key>',
      'with --orchestrator swarm: sandboxes go only to nodes labelled <key>=true (where a node agent runs)',
      DEFAULT_NODE_LABEL,
    );
}

/** The `placement` option from the flags; undefined without --orchestrator. */
export async function placementFromFlags(flags: PlacementFlags): Promise<PlacementOptions | undefined> {
  if (flags.orchestrator === undefined) {
    if (flags.swarmManager !== undefined || flags.nodeAgentTokenFile !== undefined) {
      throw new InvalidArgumentError('--swarm-manager and --node-agent-token-file need --orchestrator swarm');
    }
    return undefined;
  }
  if (flags.orchestrator !== 'swarm') {
    throw new InvalidArgumentError(`--orchestrator: "swarm" is the one built, got ${flags.orchestrator}`);
  }
  if (flags.swarmManager === undefined)
    throw new InvalidArgumentError('--orchestrator swarm needs --swarm-manager');
  if (flags.nodeAgentTokenFile === undefined) {
    throw new InvalidArgumentError('--orchestrator needs --node-agent-token-file');
  }
  const port = Number(flags.nodeAgentPort);
  if (!(Number.isInteger(port) && port >= 1 && port <= 65535)) {
    throw new InvalidArgumentError(`--node-agent-port must be a port number, got ${flags.nodeAgentPort}`);
  }
  const [{ readTokenFile }, { SwarmOrchestrator, swarmApiFrom }, { dockerEngineApi }] = await Promise.all([
    import('../http/auth.js'),
    import('@agentfense/orchestrator/swarm'),
    import('../sandboxes/runtimes.js'),
  ]);
  // One word of at least 32 characters, as the node agents demand.
  const nodeAgentToken = await readTokenFile(flags.nodeAgentTokenFile);
  return {
    orchestrator: new SwarmOrchestrator({
      api: swarmApiFrom(await dockerEngineApi(flags.swarmManager)),
      nodeAgent: { port, nodeLabel: flags.swarmNodeLabel },
    }),
    nodeAgentToken,
    image: flags.sandboxImage,
  };
}
