// Starting and stopping the node agent: clean up what a previous run left, then listen where told.
import { mkdir, realpath } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { FsBlobStore, HttpBlobStore, NodeBlobCache, type BlobReader } from '@agentfense/blobs';
import { DEFAULT_WORKER_POOL_SIZE, WorkerPool } from '@agentfense/fuse-worker';
import type { Orchestrator } from '@agentfense/orchestrator';
import { createStderrLogger, type RuntimeLogger } from '@agentfense/protocol';
import { createEngineApi } from '@agentfense/runtime-docker';
import { NodeAgentCore } from './agent.js';
import { tokenChecker } from './auth.js';
import { cleanUpLeftovers, type CleanupReport } from './cleanup.js';
import { runsHere } from './containers.js';
import { createAgentServer } from './server.js';

export interface NodeAgentOptions {
  /** Where to listen: an address only the API tier reaches (never one a sandbox container can). */
  readonly host: string;
  /** 0: any free port (tests). */
  readonly port: number;
  /** The API tier's token (at least 32 characters). */
  readonly token: string;
  /** Root-only directory of deltas, views and worker state. */
  readonly stateDir: string;
  /** Codebases an attach may name must resolve inside this directory. Default `<stateDir>/codebases`. */
  readonly codebaseRoot?: string;
  /** This node's engine (`unix:///…`; default DOCKER_HOST or docker's socket). */
  readonly dockerHost?: string;
  /** This node's name as the orchestrator reports it. Default: the host name. */
  readonly nodeName?: string;
  /**
   * Where each sandbox runs now, for the clean-up on start. Default: a sandbox runs here if this node's
   * engine has a running container labelled with its id (what Swarm's placement leaves on a node).
   */
  readonly orchestrator?: Pick<Orchestrator, 'locate'>;
  /**
   * The blob store: its shared directory, or the API tier's URL (`http://…`, `https://…`: blobs are then
   * read from `GET /v1/blobs/<digest>`). With it, an attach may name a snapshot id instead of a path.
   */
  readonly blobStore?: string;
  /** The token for an HTTP blob store (serve's `--node-agent-token-file`). Default: `token`. */
  readonly blobStoreToken?: string;
  /** Bytes of file content the node's snapshot cache (`<stateDir>/blob-cache`) keeps. Default 10 GiB. */
  readonly blobCacheBytes?: number;
  /** Idle FUSE workers kept ready for the next attach (0: spawn each on demand). Default 1. */
  readonly workerPoolSize?: number;
  readonly logger?: RuntimeLogger;
}

export const DEFAULT_BLOB_CACHE_BYTES = 10 * 1024 ** 3;

export interface NodeAgent {
  /** Where it listens. */
  readonly address: { readonly host: string; readonly port: number };
  /** What the clean-up on start did. */
  readonly cleanup: CleanupReport;
  readonly core: NodeAgentCore;
  /** Stops listening, detaches every sandbox (deltas stay) and closes the engine's pool. */
  close(): Promise<void>;
}

export async function startNodeAgent(options: NodeAgentOptions): Promise<NodeAgent> {
  const authenticated = tokenChecker(options.token);
  const logger = options.logger ?? createStderrLogger('node-agent');
  await mkdir(options.stateDir, { recursive: true, mode: 0o700 });
  const stateDir = await realpath(options.stateDir);
  const codebaseRoot = options.codebaseRoot ?? `${stateDir}/codebases`;
  await mkdir(codebaseRoot, { recursive: true, mode: 0o755 });
  const nodeName = options.nodeName ?? hostname();
  const blobCache =
    options.blobStore === undefined
      ? undefined
      : await NodeBlobCache.open({
          root: `${stateDir}/blob-cache`,
          store: await openBlobStore(options.blobStore, options.blobStoreToken ?? options.token),
          maxBytes: options.blobCacheBytes ?? DEFAULT_BLOB_CACHE_BYTES,
        });
  const engine = createEngineApi(options.dockerHost);
  const orchestrator = options.orchestrator ?? {
    locate: async (sandboxId: string) =>
      (await runsHere(engine, sandboxId))
        ? { sandboxId, nodeName, podIP: '', nodeAgent: { host: options.host, port: options.port } }
        : undefined,
  };
  // The pool the single-host control plane keeps: an idle worker holds no sandbox's data until mounted.
  const workers = new WorkerPool({
    size: options.workerPoolSize ?? DEFAULT_WORKER_POOL_SIZE,
    logFile: `${stateDir}/worker-pool.log`,
    logger,
  });
  const core = new NodeAgentCore({
    nodeName,
    stateDir,
    codebaseRoot,
    engine,
    logger,
    workers,
    ...(blobCache === undefined ? {} : { blobCache }),
  });
  const server = createAgentServer({ core, authenticated });
  try {
    const cleanup = await cleanUpLeftovers({ stateDir, nodeName, orchestrator, logger });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    core.markReady();
    if ((options.workerPoolSize ?? DEFAULT_WORKER_POOL_SIZE) > 0) workers.prewarm();
    const { address, port } = server.address() as AddressInfo;
    return {
      address: { host: address, port },
      cleanup,
      core,
      close: async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await core.close();
        await engine.close();
      },
    };
  } catch (err) {
    server.close();
    await workers.close();
    await engine.close();
    throw err;
  }
}

/** A URL is the API tier's HTTP backend; anything else the shared directory. */
async function openBlobStore(where: string, token: string): Promise<BlobReader> {
  return /^https?:\/\//i.test(where) ? new HttpBlobStore({ url: where, token }) : FsBlobStore.open(where);
}
