// Per-sandbox cgroups: detect what the host offers, plan which limits can hold, create the cgroups.
import type { ResourceLimits } from '@agentfense/protocol';
import { InvalidArgumentError } from '@agentfense/protocol';
import type { RuntimeLogger } from './logger.js';
import { detectCgroupHost } from './cgroups/detect.js';
import type { CgroupHost } from './cgroups/detect.js';
import { planCgroups, validateLimits } from './cgroups/plan.js';
import type { SandboxCgroup } from './cgroups/types.js';
import { createV1Cgroup } from './cgroups/v1.js';
import { createV2Cgroup } from './cgroups/v2.js';

/** Default directory (under each hierarchy's root) that holds one cgroup per sandbox. */
export const DEFAULT_CGROUP_PARENT = 'agentfense';

export interface CreateSandboxCgroupOptions {
  readonly sandboxId: string;
  readonly limits: ResourceLimits;
  /** Where the hierarchies are mounted; default /sys/fs/cgroup. */
  readonly root?: string;
  /** Detected host layout (detected from `root` when absent). */
  readonly host?: CgroupHost;
  /** Relative directory under each hierarchy root; default "agentfense". */
  readonly parent?: string;
  readonly logger: RuntimeLogger;
}

/**
 * Creates the sandbox's cgroups with its limits written, or returns null when no limit was asked for or
 * none can be enforced on this host (the caller then reports mechanism 'none').
 */
export async function createSandboxCgroup(
  options: CreateSandboxCgroupOptions,
): Promise<SandboxCgroup | null> {
  validateLimits(options.limits);
  const parent = options.parent ?? DEFAULT_CGROUP_PARENT;
  if (
    parent.startsWith('/') ||
    parent.split('/').some((part) => part === '' || part === '.' || part === '..')
  ) {
    throw new InvalidArgumentError(
      `cgroup parent must be a relative path without "." or "..", got ${JSON.stringify(parent)}`,
    );
  }
  const host =
    options.host ?? (await detectCgroupHost(options.root === undefined ? {} : { root: options.root }));
  const plan = planCgroups(host, options.limits);
  if (plan.mechanism === 'none') return null;
  const create = plan.mechanism === 'cgroup-v2' ? createV2Cgroup : createV1Cgroup;
  return create({
    sandboxId: options.sandboxId,
    host,
    plan,
    requested: options.limits,
    parent,
    logger: options.logger,
  });
}
