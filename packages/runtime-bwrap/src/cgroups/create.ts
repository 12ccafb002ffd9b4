// Per-sandbox cgroups: detect what the host offers, plan which limits can hold, create the cgroups.
import { posix } from 'node:path';
import type { ResourceLimits } from '@agentfense/protocol';
import { InvalidArgumentError } from '@agentfense/protocol';
import type { RuntimeLogger } from '../logger.js';
import { detectCgroupHost } from '@agentfense/protocol';
import type { CgroupHost } from '@agentfense/protocol';
import { planCgroups, validateLimits } from './plan.js';
import type { SandboxCgroup } from './types.js';
import { createV1Cgroup, killAndRemoveV1 } from './v1.js';
import { createV2Cgroup, killAndRemoveV2 } from './v2.js';

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

/**
 * Recovery of a sandbox whose control plane died (clearLeftovers): kills every process still in the
 * sandbox's cgroups, in every hierarchy, and removes them (without this they stayed for good, and their
 * processes kept running when bwrap's --die-with-parent did not fire). Reading cgroup.procs finds the
 * whole tree, however it was reparented. The kill loops are the teardown's own (freeze on v1, cgroup.kill
 * on v2): which version the dead control plane used is unknown, so both are cleared. Returns the pids
 * killed. Idempotent; a sandbox without cgroups is a no-op.
 */
export async function removeSandboxCgroups(options: {
  readonly sandboxId: string;
  readonly host: CgroupHost;
  readonly parent?: string;
  readonly logger: RuntimeLogger;
}): Promise<number[]> {
  // The id names a directory: only a well-formed one (never `..` or a path) is joined.
  if (!/^sb_[0-9a-f-]+$/.test(options.sandboxId)) return [];
  const parent = options.parent ?? DEFAULT_CGROUP_PARENT;
  const { host, logger, sandboxId } = options;
  const dirOf = (root: string): string => posix.join(root, parent, sandboxId);
  const v1Roots = new Set(host.v1.values());
  const freezer = host.v1.get('freezer');
  const killed = await killAndRemoveV1({
    dirs: [...v1Roots].map(dirOf),
    freezer: freezer === undefined ? undefined : dirOf(freezer),
    logger,
  });
  // A v2 hierarchy mounted where a v1 one is (never on a sane host) is cleared once, above.
  if (host.v2 !== null && !v1Roots.has(host.v2.path)) {
    killed.push(...(await killAndRemoveV2({ dir: dirOf(host.v2.path), logger })));
  }
  return killed;
}
