// Per-sandbox cgroups: detect what the host offers, plan which limits can hold, create the cgroups.
import { posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ResourceLimits } from '@agentfense/protocol';
import { InternalError, InvalidArgumentError } from '@agentfense/protocol';
import type { RuntimeLogger } from './logger.js';
import { detectCgroupHost } from './cgroups/detect.js';
import type { CgroupHost } from './cgroups/detect.js';
import {
  TEARDOWN_DEADLINE_MS,
  TEARDOWN_RETRY_MS,
  killPids,
  readPids,
  removeCgroupDir,
  removeParentIfEmpty,
  writeControl,
} from './cgroups/fs.js';
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

/**
 * Recovery of a sandbox whose control plane died (clearLeftovers): kills every process still in the
 * sandbox's cgroups, in every hierarchy, and removes them (without this they stayed for good, and their
 * processes kept running when bwrap's --die-with-parent did not fire). Reading cgroup.procs finds the
 * whole tree, however it was reparented; killing the namespace's pid 1 among them makes the kernel kill
 * the rest. Returns the pids killed. Idempotent; a sandbox without cgroups is a no-op.
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
  const roots = [...options.host.v1.values(), ...(options.host.v2 === null ? [] : [options.host.v2.path])];
  const dirs = [...new Set(roots)].map((root) => posix.join(root, parent, options.sandboxId));
  const deadline = Date.now() + TEARDOWN_DEADLINE_MS;
  // A teardown that died half-way may have left the tree frozen, and frozen processes die only once thawed.
  const freezer = options.host.v1.get('freezer');
  if (freezer !== undefined) {
    await writeControl(posix.join(freezer, parent, options.sandboxId, 'freezer.state'), 'THAWED').catch(
      () => undefined,
    );
  }
  const killed = new Set<number>();
  for (;;) {
    const pids = (await Promise.all(dirs.map((d) => readPids(posix.join(d, 'cgroup.procs'))))).flat();
    if (pids.length === 0) break;
    if (Date.now() > deadline)
      throw new InternalError(`sandbox cgroup still has processes ${pids.join(',')} after recovery`);
    for (const pid of pids) killed.add(pid);
    killPids(pids, options.logger);
    await sleep(TEARDOWN_RETRY_MS);
  }
  for (const dir of dirs) {
    if (!(await removeCgroupDir(dir, deadline))) throw new InternalError(`could not remove cgroup ${dir}`);
    await removeParentIfEmpty(posix.dirname(dir), options.logger);
  }
  return [...killed];
}
