// What ControlPlane.open() takes: where its data lives, its runtimes, presets, supervision, the bounds of
// its workers and policy points, and the background work it does.
import type { Level, Logger } from 'pino';
import type { ResourceLimits } from '@agentfense/protocol';
import { InvalidArgumentError } from '@agentfense/protocol';
import type { NetworkOptions } from '@agentfense/network';
import type { PlacementOptions } from './placement/options.js';
import type { PresetRegistry } from './presets/registry.js';
import type { CheckpointLimitOptions } from './sandboxes/checkpoint-limits.js';
import type { CompactionStep } from './sandboxes/compactor.js';
import type { PrewarmKind } from './sandboxes/prewarm.js';
import type { RuntimeMap } from './sandboxes/runtimes.js';
import type { SupervisionOptions } from '@agentfense/fuse-worker';
import type { WorkerMemoryOptions } from '@agentfense/fuse-worker';

export interface ControlPlaneOptions {
  /** The data directory; default $AGENTFENSE_DATA_DIR, else $XDG_DATA_HOME/agentfense, else ~/.local/share/agentfense. */
  readonly dataDir?: string;
  /**
   * A PostgreSQL URL (`postgres://user@host/db`): the sandbox, codebase and checkpoint records live there
   * instead of the data directory's SQLite file, shared by every control plane given the same URL and
   * data directory (API replicas, docs/scale-out.md). The password is never logged.
   */
  readonly database?: string;
  /**
   * Place sandboxes on cluster nodes through an orchestrator and the node agents instead of running them
   * in this process (docs/scale-out.md, "How serve routes"): start places, the commands, files and delta
   * go to the node agent where the sandbox runs. Off: every sandbox runs on this host.
   */
  readonly placement?: PlacementOptions;
  /** Log here instead of `<dataDir>/logs/control.log`. */
  readonly logger?: Logger;
  readonly logLevel?: Level;
  /** Runtimes by name, merged over the default `{ bwrap }` (Docker plugs in here). */
  readonly runtimes?: RuntimeMap;
  /** Runtime of sandboxes created without one; default 'bwrap'. */
  readonly defaultRuntime?: string;
  /** Presets that `preset` names resolve in; default the process-wide registry. */
  readonly presets?: PresetRegistry;
  readonly supervision?: SupervisionOptions;
  /**
   * Sandboxes' network: a hosts file the policy point resolves names from before the host's resolver
   * (default: `AGENTFENSE_NETWORK_HOSTS`, else none), open connections per sandbox (default 512), and
   * `memory`: the policy point's bound, `baseBytes` (128 MiB) + `share` (1/16) x its sandbox's memory.
   */
  readonly network?: NetworkOptions;
  /** Largest single uploaded file (bytes); default 1 GiB. */
  readonly maxUploadBytes?: number;
  /** Period of the expired-sandbox reaper (ms); 0 turns it off. */
  readonly reapIntervalMs?: number;
  /**
   * Idle workers kept spawned ahead of time once a sandbox has started (default 1): a start then costs a
   * mount, not a process start. 0 spawns every worker on demand (about 15 MiB less while idle).
   */
  readonly workerPoolSize?: number;
  /**
   * Idle docker containers kept started ahead per image once a docker sandbox has started (default 2, or
   * 0 when `workerPoolSize` is 0: one-shot processes keep nothing ahead). Each serves one sandbox and is
   * removed with it; a sandbox with the network on never uses one. close() removes the idle ones.
   */
  readonly dockerPoolSize?: number;
  /**
   * Limits of sandboxes that do not set them, field by field over DEFAULT_RESOURCES (pids 1024, memory
   * 4 GiB, all CPUs but one, disk 10 GiB, /tmp 1 GiB).
   */
  readonly defaultResources?: ResourceLimits;
  /**
   * The memory bound of each sandbox's worker, which runs in a cgroup of its own: `baseBytes` (default
   * 256 MiB) + `share` (default 0.5) x the sandbox's memory limit. Past it the kernel kills the worker;
   * supervision restarts it, and repeated kills put the sandbox in ERROR saying so.
   */
  readonly workerMemory?: WorkerMemoryOptions;
  /**
   * A sandbox of this runtime will be started soon (the one-shot CLI): spawn a worker and check the
   * runtime's host now, in the background, while the data directory is recovered and the sandbox created.
   */
  readonly prewarm?: PrewarmKind;
  /**
   * What recovery does with a sandbox whose owner died in the middle of a commit: 'keep' it, stopped, for
   * its user to finish (`commit`) or give up (`discard`, `destroySandbox`) — the default; or 'finish' the
   * commit during open (the reaper of a killed `agentfense run` does).
   */
  readonly unfinishedCommits?: 'keep' | 'finish';
  /**
   * Checkpoints one sandbox may keep (`maxCheckpoints`, default $AGENTFENSE_MAX_CHECKPOINTS, else 256) and
   * frozen layers its stack may have (`maxStackDepth`, default $AGENTFENSE_MAX_STACK_DEPTH, else 32):
   * integers from 1 to 4096; a deeper stack is compacted in the background. What the layers hold is
   * charged to the sandbox's disk quota.
   */
  readonly checkpoints?: CheckpointLimitOptions;
  /**
   * Tests only: called at each step of a background stack compaction; a throw there stops the compaction
   * as a process death would (its record stays for the next open's recovery).
   */
  readonly compactionFault?: (step: CompactionStep) => void;
}

/** Idle docker containers kept per image by default (docs/decisions.md, "Docker keeps a pool of idle containers"). */
export const DEFAULT_DOCKER_POOL_SIZE = 2;

/** Largest `workerPoolSize`: each idle worker is a process of ~15 MiB. */
const MAX_WORKER_POOL_SIZE = 16;

/** Refuses a `workerPoolSize` out of range, naming the bounds. */
export function checkWorkerPoolSize(pool: number | undefined): void {
  if (pool !== undefined && !(Number.isInteger(pool) && pool >= 0 && pool <= MAX_WORKER_POOL_SIZE)) {
    throw new InvalidArgumentError(
      `workerPoolSize must be an integer from 0 to ${MAX_WORKER_POOL_SIZE} (idle workers kept ahead), got ${String(pool)}`,
    );
  }
}
