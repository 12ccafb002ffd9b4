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
  readonly swarmWarmPool: string;
  readonly swarmWarmSize: string;
  readonly blobs?: string;
}

/** The node label an operator sets where a node agent runs (deploy/swarm/node-agent.service). */
export const DEFAULT_NODE_LABEL = 'agentfense.node-agent';
export const DEFAULT_SANDBOX_IMAGE = 'agentfense/sandbox:latest';
/** A warm placement's CPU (millicores) and memory: what a sandbox that sets no limits gets. */
const DEFAULT_WARM_SIZE = `1000:${4 * 1024 ** 3}`;
const MAX_WARM_POOL = 64;

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
    )
    .option(
      '--swarm-warm-pool <n>',
      `with --orchestrator swarm: sandbox containers kept placed ahead of time across the cluster (0-${MAX_WARM_POOL}), claimed by starts of their size`,
      '0',
    )
    .option(
      '--swarm-warm-size <millicores:bytes>',
      "with --swarm-warm-pool: the warm containers' CPU and memory; only a sandbox asking exactly that claims one",
      DEFAULT_WARM_SIZE,
    )
    .option(
      '--blobs <dir>',
      "the blob store's directory, served to node agents at GET /v1/blobs/<digest> (agentfense node --blobs http://…) with the node agents' token (--node-agent-token-file); with --orchestrator, placed sandboxes' codebases go to their nodes as snapshots in it (every node agent then needs --blobs)",
    );
}

/** `--blobs DIR` and the token its readers present; undefined without --blobs. */
export async function blobsFromFlags(
  flags: PlacementFlags,
  placement: PlacementOptions | undefined,
): Promise<{ readonly dir: string; readonly readerToken: string } | undefined> {
  if (flags.blobs === undefined) return undefined;
  if (flags.nodeAgentTokenFile === undefined) {
    throw new InvalidArgumentError(
      '--blobs needs --node-agent-token-file: blobs are served to node agents only, with their token',
    );
  }
  if (flags.blobs === '') throw new InvalidArgumentError('--blobs: a directory');
  const { readTokenFile } = await import('../http/auth.js');
  const readerToken = placement?.nodeAgentToken ?? (await readTokenFile(flags.nodeAgentTokenFile));
  return { dir: flags.blobs, readerToken };
}

/** The warm pool's size and shape from the flags; undefined for none. */
function warmPoolFromFlags(
  flags: PlacementFlags,
  image: string,
):
  | { size: number; shape: { image: string; resources: { cpuMillis: number; memoryBytes: number } } }
  | undefined {
  const size = Number(flags.swarmWarmPool);
  if (!(Number.isInteger(size) && size >= 0 && size <= MAX_WARM_POOL)) {
    throw new InvalidArgumentError(`--swarm-warm-pool: a whole number from 0 to ${MAX_WARM_POOL}`);
  }
  const m = /^(\d+):(\d+)$/.exec(flags.swarmWarmSize);
  const cpuMillis = Number(m?.[1]);
  const memoryBytes = Number(m?.[2]);
  if (m === null || !(cpuMillis > 0 && Number.isSafeInteger(memoryBytes) && memoryBytes > 0)) {
    throw new InvalidArgumentError(`--swarm-warm-size: <millicores>:<bytes>, got ${flags.swarmWarmSize}`);
  }
  return size === 0 ? undefined : { size, shape: { image, resources: { cpuMillis, memoryBytes } } };
}

/** The `placement` option from the flags; undefined without --orchestrator. */
export async function placementFromFlags(flags: PlacementFlags): Promise<PlacementOptions | undefined> {
  if (flags.orchestrator === undefined) {
    if (flags.swarmManager !== undefined) {
      throw new InvalidArgumentError('--swarm-manager needs --orchestrator swarm');
    }
    if (flags.nodeAgentTokenFile !== undefined && flags.blobs === undefined) {
      throw new InvalidArgumentError('--node-agent-token-file needs --orchestrator swarm or --blobs');
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
  const warmPool = warmPoolFromFlags(flags, flags.sandboxImage);
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
      ...(warmPool === undefined ? {} : { warmPool }),
    }),
    nodeAgentToken,
    image: flags.sandboxImage,
  };
}
