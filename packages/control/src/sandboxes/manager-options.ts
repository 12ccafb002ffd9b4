// What a SandboxManager is built with (manager.ts).
import type { Logger } from 'pino';
import type { ResourceLimits } from '@agentfense/protocol';
import type { NetworkOptions } from '@agentfense/network';
import type { CodebaseService } from '../codebases/service.js';
import type { DataLayout } from '../paths.js';
import type { PresetRegistry } from '../presets/registry.js';
import type { SandboxStore } from '../store/sandboxes.js';
import type { SandboxHostUsers } from './host-user.js';
import type { PlacedRules } from './policy-changes.js';
import type { RuntimeRegistry } from './runtimes.js';
import type { SupervisionOptions } from '@agentfense/fuse-worker';
import type { WorkerMemoryOptions } from '@agentfense/fuse-worker';

export interface SandboxManagerOptions {
  readonly layout: DataLayout;
  readonly store: SandboxStore;
  readonly codebases: CodebaseService;
  readonly runtimes: RuntimeRegistry;
  /** The host users sandboxes run as (a uid of their own each, leased host-wide). */
  readonly hostUsers: SandboxHostUsers;
  readonly logger: Logger;
  readonly presets?: PresetRegistry | undefined;
  readonly supervision?: SupervisionOptions | undefined;
  /** How sandboxes with a network policy resolve names and how many connections each may hold. */
  readonly network?: NetworkOptions | undefined;
  /** The runtime of sandboxes created without one. Default 'bwrap'. */
  readonly defaultRuntime?: string | undefined;
  /** Called before a running sandbox's runtime stops (stop, destroy, ERROR): sessions close here. */
  readonly onStopping?: ((id: string) => Promise<void>) | undefined;
  /** Called when a worker mounted a sandbox's delta, with the frozen layers it stands on (checkpoints.ts). */
  readonly onLayers?: ((id: string, frozen: readonly string[]) => Promise<void>) | undefined;
  /** The bytes of the frozen layers a sandbox made, charged to its disk quota at every mount. */
  readonly frozenBytes?: ((id: string) => Promise<number>) | undefined;
  /** Called after a worker was replaced under a running sandbox (with the sandbox's runtime name). */
  readonly onWorkerRestart?: ((id: string, runtime: string) => Promise<void>) | undefined;
  /** Idle workers kept spawned ahead of time once a sandbox has started (default 1; 0: none). */
  readonly workerPoolSize?: number | undefined;
  /** Limits of sandboxes that do not set them (default DEFAULT_RESOURCES; each field replaceable). */
  readonly defaultResources?: ResourceLimits | undefined;
  /** Each worker's memory bound: base + share x its sandbox's memory limit (worker-cgroup.ts). */
  readonly workerMemory?: WorkerMemoryOptions | undefined;
  /** What recovery does with a dead owner's unfinished commit (recovery.ts); default 'keep'. */
  readonly unfinishedCommits?: 'keep' | 'finish' | undefined;
  /** Sandboxes placed on cluster nodes, whose rules change through their node agents (policy-changes.ts). */
  readonly placed?: PlacedRules | undefined;
}
