// The one interface every orchestrator adapter implements. The API tier asks an orchestrator to place a
// sandbox's container, follows where it runs, and removes it; it never schedules by itself, so the same
// four calls serve Kubernetes (agent-sandbox) and Docker Swarm.

/** What a sandbox's container needs from the cluster. */
export interface ResourceRequest {
  /** CPU in millicores (1000 = one core). */
  readonly cpuMillis: number;
  /** Memory in bytes. */
  readonly memoryBytes: number;
}

/** A request to run one sandbox's container somewhere in the cluster. */
export interface PlacementRequest {
  /** The sandbox's id (`sb_…`); the orchestrator's object is named after it. */
  readonly sandboxId: string;
  /** The sandbox container's image (af-init as pid 1). */
  readonly image: string;
  readonly resources: ResourceRequest;
  /** Extra labels for the orchestrator's object (keys `prefix/name`, values ≤ 63 characters). */
  readonly labels?: Readonly<Record<string, string>>;
}

/** Where a placed sandbox runs and which node agent serves it. */
export interface Location {
  readonly sandboxId: string;
  /** The node the sandbox's container runs on. */
  readonly nodeName: string;
  /** The sandbox container's own address. */
  readonly podIP: string;
  /** The node agent on that node: the address the API tier calls for exec, sessions and the view. */
  readonly nodeAgent: { readonly host: string; readonly port: number };
}

/**
 * Why a placement was lost. `node-lost`: the node stopped answering or the container was evicted from it;
 * `container-lost`: the container went away on a healthy node; `failed`: the orchestrator will not run it.
 */
export type LostReason = 'node-lost' | 'container-lost' | 'failed';

/** One step of a sandbox's placement, as the watch stream reports it. */
export type PlacementStatus =
  | { readonly state: 'pending'; readonly sandboxId: string; readonly detail: string }
  | { readonly state: 'ready'; readonly sandboxId: string; readonly nodeName: string; readonly podIP: string }
  | {
      readonly state: 'lost';
      readonly sandboxId: string;
      readonly reason: LostReason;
      /** The node it ran on, when it had one. */
      readonly nodeName: string | undefined;
      /** What went with it: the processes and sessions always; files only where they lived on the node. */
      readonly detail: string;
      /** Whether the orchestrator places it again by itself (a `pending` and a `ready` follow). */
      readonly replaced: boolean;
    }
  | { readonly state: 'gone'; readonly sandboxId: string };

export interface WatchOptions {
  /** Ends the stream. */
  readonly signal?: AbortSignal;
}

/**
 * Sandbox containers placed ahead of time with no sandbox yet (no codebase, no rules: nothing is attached
 * in them until claimed), each under a placement id of its own. A start claims one (the API tier's
 * database decides which replica gets it), marks it claimed here and attaches its sandbox there; a
 * claimed placement is removed with its sandbox, never handed back. The adapter keeps `size` idle.
 */
export interface WarmPool {
  /** Idle placements running now that fit `shape` (its image and exact resources), oldest first. */
  idle(shape: { readonly image: string; readonly resources: ResourceRequest }): Promise<string[]>;
  /** Marks an idle placement claimed by `sandboxId`; false when it is gone or no longer idle. */
  markClaimed(placementId: string, sandboxId: string): Promise<boolean>;
  /**
   * Places idle ones until there are `size`, and removes idle ones beyond it (never one claimed
   * meanwhile: a removal and a claim race on the orchestrator, where one of them fails).
   */
  refill(): Promise<void>;
  /** Every placement labelled idle, of any shape, running or not. */
  unclaimed(): Promise<string[]>;
  /** Removes an idle placement; false when it is gone or no longer idle (a claim got it first). */
  retire(placementId: string): Promise<boolean>;
}

/** The orchestrator adapter: place, watch, remove, locate. */
export interface Orchestrator {
  /** Placements made ahead of time, when the adapter keeps them (Swarm with a warm pool size). */
  readonly warm?: WarmPool;
  /** Asks for the sandbox's container; returns once the orchestrator accepted the request. */
  place(request: PlacementRequest): Promise<void>;
  /**
   * Every placement change of this adapter's sandboxes, starting with each one's current status. Survives
   * the orchestrator's own stream ending or expiring; ends when `signal` aborts.
   */
  watch(options?: WatchOptions): AsyncIterable<PlacementStatus>;
  /** Removes the sandbox's container; a sandbox that is not placed is not an error. */
  remove(sandboxId: string): Promise<void>;
  /** Where the sandbox runs now; `undefined` while it is not ready. */
  locate(sandboxId: string): Promise<Location | undefined>;
}
