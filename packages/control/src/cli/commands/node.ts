// `agentfense node --listen HOST:PORT --token-file F --state DIR`: the node agent of a cluster deployment
// (@agentfense/node-agent, docs/scale-out.md). It runs as root on every node that may run sandboxes, in
// the foreground until SIGINT/SIGTERM; the API tier is its only client. Bind it to an address sandbox
// containers cannot reach (the node's cluster address, fenced to the API's hosts).
import type { Command } from 'commander';
import { InvalidArgumentError } from '@agentfense/protocol/core';
import type { CliContext } from '../io.js';
import { untilSignal } from '../signals.js';

interface NodeFlags {
  readonly listen: string;
  readonly tokenFile: string;
  readonly state: string;
  readonly codebases?: string;
  readonly dockerHost?: string;
  readonly nodeName?: string;
  readonly blobs?: string;
  readonly blobsTokenFile?: string;
  readonly blobCacheBytes?: string;
  readonly workerPool?: string;
}

export function registerNode(program: Command, { io, result }: CliContext): void {
  program
    .command('node')
    .description(
      'run the node agent (cluster deployments): FUSE views and the exec relay for the sandboxes placed on this node, until SIGINT/SIGTERM',
    )
    .requiredOption(
      '--listen <host:port>',
      'address for the API tier (never one a sandbox container reaches)',
    )
    .requiredOption('--token-file <file>', "the API tier's bearer token (at least 32 characters)")
    .requiredOption('--state <dir>', 'root-only directory of deltas, views and worker state')
    .option('--codebases <dir>', 'codebases an attach may name must be inside it (default <state>/codebases)')
    .option('--docker-host <url>', "this node's engine (default $DOCKER_HOST or unix:///var/run/docker.sock)")
    .option('--node-name <name>', 'this node as the orchestrator names it (default: the host name)')
    .option(
      '--blobs <dir|url>',
      "the blob store: its shared directory, or the API tier's http(s):// URL (GET /v1/blobs/<digest>); attaches may then name a snapshot id",
    )
    .option(
      '--blobs-token-file <file>',
      "with --blobs http(s)://: the token serve takes for blobs (default: --token-file's, which serve's --node-agent-token-file holds)",
    )
    .option('--blob-cache-bytes <n>', 'file bytes the node keeps of materialised snapshots (default 10 GiB)')
    .option('--worker-pool <n>', 'idle FUSE workers kept ready for the next attach, 0-16 (default 1)')
    .action(async (flags: NodeFlags) => {
      const [{ parseListen, readTokenFile }, { startNodeAgent }] = await Promise.all([
        import('../../http/auth.js'),
        import('@agentfense/node-agent'),
      ]);
      const { host, port } = parseListen(flags.listen);
      const token = await readTokenFile(flags.tokenFile);
      if (flags.blobsTokenFile !== undefined && !/^https?:\/\//i.test(flags.blobs ?? '')) {
        throw new InvalidArgumentError('--blobs-token-file needs --blobs http(s)://…');
      }
      const blobsToken =
        flags.blobsTokenFile === undefined ? undefined : await readTokenFile(flags.blobsTokenFile);
      const cacheBytes = flags.blobCacheBytes === undefined ? undefined : Number(flags.blobCacheBytes);
      if (cacheBytes !== undefined && !(Number.isSafeInteger(cacheBytes) && cacheBytes > 0)) {
        throw new InvalidArgumentError('--blob-cache-bytes: a positive whole number of bytes');
      }
      const pool = flags.workerPool === undefined ? undefined : Number(flags.workerPool);
      if (pool !== undefined && !(Number.isInteger(pool) && pool >= 0 && pool <= 16)) {
        throw new InvalidArgumentError('--worker-pool: a whole number from 0 to 16');
      }
      const signal = untilSignal();
      try {
        const agent = await startNodeAgent({
          host,
          port,
          token,
          stateDir: flags.state,
          ...(flags.codebases === undefined ? {} : { codebaseRoot: flags.codebases }),
          ...(flags.dockerHost === undefined ? {} : { dockerHost: flags.dockerHost }),
          ...(flags.nodeName === undefined ? {} : { nodeName: flags.nodeName }),
          ...(flags.blobs === undefined ? {} : { blobStore: flags.blobs }),
          ...(blobsToken === undefined ? {} : { blobStoreToken: blobsToken }),
          ...(cacheBytes === undefined ? {} : { blobCacheBytes: cacheBytes }),
          ...(pool === undefined ? {} : { workerPoolSize: pool }),
        });
        const { removed, kept } = agent.cleanup;
        io.stderr.write(
          `agentfense: node agent on ${agent.address.host}:${agent.address.port}; cleaned up ${removed.length} sandbox(es) placed elsewhere, kept ${kept.length}\n`,
        );
        try {
          const ended = await signal.promise;
          io.stderr.write(`agentfense: ${ended}: detaching sandboxes\n`);
        } finally {
          await agent.close();
        }
      } finally {
        signal.dispose();
      }
      result.exitCode = 0;
    });
}
