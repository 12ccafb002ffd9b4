// What a control plane needs to place its sandboxes on a cluster instead of running them itself.
import type { BlobStore } from '@agentfense/blobs';
import type { Orchestrator } from '@agentfense/orchestrator';

export interface PlacementOptions {
  /** The adapter that places, follows, finds and removes sandbox containers (Swarm, Kubernetes). */
  readonly orchestrator: Orchestrator;
  /** The bearer token every node agent takes (`agentfense node --token-file`). Never logged. */
  readonly nodeAgentToken: string;
  /** The sandbox containers' image: its entrypoint waits for af-init (`SANDBOX_WAIT_COMMAND`). */
  readonly image: string;
  /**
   * The blob store the node agents read (`serve --blobs`, their `--blobs`): a sandbox's codebase is then
   * sent as a snapshot id instead of a path. Absent: every node must see the codebase at its path.
   */
  readonly blobs?: BlobStore;
  /** How long a start waits for the orchestrator's `ready`; default 120 s. */
  readonly readyTimeoutMs?: number;
}

/** `owner_instance` of a sandbox placed on a cluster node: no process of the API tier owns it. */
export const ORCHESTRATED = 'orchestrated';

export const DEFAULT_READY_TIMEOUT_MS = 120_000;
