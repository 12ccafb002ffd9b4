// The per-sandbox cgroup handle both cgroup versions implement.
import type { EnforcedLimits, ResourceLimits } from '@agentfense/protocol';
import type { RuntimeLogger } from '../logger.js';
import type { CgroupHost } from '@agentfense/protocol';
import type { CgroupPlan } from './plan.js';

/** One sandbox's cgroups (one per controller on v1, one directory on v2). */
export interface SandboxCgroup {
  /** The limits really in force and the mechanism. */
  readonly limits: EnforcedLimits;
  /** The cgroup directories on the host (tests assert they are gone after `destroy`). */
  readonly paths: readonly string[];
  /** Moves a process into the sandbox's cgroups; processes it forks afterwards stay there. */
  attach(pid: number): Promise<void>;
  /** How many processes the kernel's OOM killer has killed in this sandbox so far. */
  oomKills(): Promise<number>;
  /** The pids currently in the sandbox's cgroups (host pid namespace). */
  pids(): Promise<number[]>;
  /** Kills every process left in the cgroups and removes them. Idempotent. */
  destroy(): Promise<void>;
}

/** What the v1 and v2 constructors take. */
export interface CgroupCreateOptions {
  readonly sandboxId: string;
  readonly host: CgroupHost;
  readonly plan: CgroupPlan;
  readonly requested: ResourceLimits;
  /** Relative directory under each hierarchy's root that holds per-sandbox cgroups (e.g. "agentfense"). */
  readonly parent: string;
  readonly logger: RuntimeLogger;
}
