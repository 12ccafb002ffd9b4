// Decides, without touching the host, which cgroup version and controllers enforce a sandbox's limits.
import type { EnforcedLimits, ResourceLimits } from '@agentfense/protocol';
import { InvalidArgumentError, NO_LIMITS } from '@agentfense/protocol';
import type { CgroupController, CgroupHost } from '@agentfense/protocol';

/** The outcome of planning: which mechanism, which controllers to create, which limits will hold. */
export interface CgroupPlan {
  readonly mechanism: 'cgroup-v1' | 'cgroup-v2' | 'none';
  /** Controllers to create a cgroup in (v1: one directory per hierarchy; v2: enabled in one directory). */
  readonly controllers: readonly CgroupController[];
  readonly limits: EnforcedLimits;
}

/** The kernel refuses a CFS quota below 1 ms; cpu.shares below 2. */
const MIN_CPU_QUOTA_US = 1_000;
const MIN_CPU_SHARES = 2;

/** Throws InvalidArgumentError for limits that are not positive integers in the kernel's ranges. */
export function validateLimits(limits: ResourceLimits): void {
  const check = (name: keyof ResourceLimits, min: number): void => {
    const value = limits[name];
    if (value === undefined) return;
    if (!Number.isSafeInteger(value) || value < min) {
      throw new InvalidArgumentError(`resources.${name} must be an integer >= ${min}, got ${String(value)}`);
    }
  };
  check('memoryBytes', 1 << 20);
  check('pidsLimit', 1);
  check('cpuQuota', MIN_CPU_QUOTA_US);
  check('cpuShares', MIN_CPU_SHARES);
}

/** The controllers a set of limits needs. */
function neededControllers(limits: ResourceLimits): CgroupController[] {
  const needed: CgroupController[] = [];
  if (limits.memoryBytes !== undefined) needed.push('memory');
  if (limits.pidsLimit !== undefined) needed.push('pids');
  if (limits.cpuQuota !== undefined || limits.cpuShares !== undefined) needed.push('cpu');
  return needed;
}

/**
 * Picks v2 when the unified hierarchy has every needed controller, otherwise whichever version offers
 * more of them (v1 on hosts like this one, where v2 is mounted without memory/pids). Limits whose
 * controller is missing are reported as null: never claimed, never silently assumed.
 */
export function planCgroups(host: CgroupHost, limits: ResourceLimits): CgroupPlan {
  const needed = neededControllers(limits);
  if (needed.length === 0) return { mechanism: 'none', controllers: [], limits: NO_LIMITS };
  const inV2 = host.v2 === null ? [] : needed.filter((c) => host.v2?.controllers.has(c) === true);
  const inV1 = needed.filter((c) => host.v1.has(c));
  const useV2 = inV2.length === needed.length || inV2.length > inV1.length;
  const available = useV2 ? inV2 : inV1;
  if (available.length === 0) return { mechanism: 'none', controllers: [], limits: NO_LIMITS };
  const has = (c: CgroupController): boolean => available.includes(c);
  const enforced: EnforcedLimits = {
    memoryBytes: has('memory') ? (limits.memoryBytes ?? null) : null,
    pidsLimit: has('pids') ? (limits.pidsLimit ?? null) : null,
    cpuQuota: has('cpu') ? (limits.cpuQuota ?? null) : null,
    cpuShares: has('cpu') ? (limits.cpuShares ?? null) : null,
    mechanism: useV2 ? 'cgroup-v2' : 'cgroup-v1',
  };
  // v1 teardown freezes the sandbox before killing it, so no process can fork while it is being killed.
  const controllers = !useV2 && host.v1.has('freezer') ? [...available, 'freezer' as const] : available;
  return { mechanism: enforced.mechanism as CgroupPlan['mechanism'], controllers, limits: enforced };
}
