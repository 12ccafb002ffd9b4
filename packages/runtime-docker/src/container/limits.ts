// Which of a sandbox's requested limits the engine can enforce (pure), from what `docker info` reports.
import type { EnforcedLimits, ResourceLimits } from '@agentfense/protocol';

/** What the engine says it supports (fields of `docker info`). */
export interface EngineCapabilities {
  readonly memoryLimit: boolean;
  readonly swapLimit: boolean;
  readonly pidsLimit: boolean;
  readonly cpuCfsQuota: boolean;
  readonly cpuShares: boolean;
}

/**
 * The limits in force for `requested` on an engine with `caps`: a limit the engine cannot enforce is null
 * (never claimed), and `mechanism` is 'docker' when at least one limit holds.
 */
export function planLimits(requested: ResourceLimits, caps: EngineCapabilities): EnforcedLimits {
  const pick = (value: number | undefined, supported: boolean): number | null =>
    value !== undefined && supported ? value : null;
  const limits = {
    memoryBytes: pick(requested.memoryBytes, caps.memoryLimit),
    cpuQuota: pick(requested.cpuQuota, caps.cpuCfsQuota),
    cpuShares: pick(requested.cpuShares, caps.cpuShares),
    pidsLimit: pick(requested.pidsLimit, caps.pidsLimit),
  };
  const any = Object.values(limits).some((v) => v !== null);
  return { ...limits, mechanism: any ? 'docker' : 'none' };
}

/** Reads the capability flags out of `docker info --format '{{json .}}'`. */
export function parseEngineCapabilities(info: Record<string, unknown>): EngineCapabilities {
  const flag = (name: string): boolean => info[name] === true;
  return {
    memoryLimit: flag('MemoryLimit'),
    swapLimit: flag('SwapLimit'),
    pidsLimit: flag('PidsLimit'),
    cpuCfsQuota: flag('CpuCfsQuota'),
    cpuShares: flag('CPUShares'),
  };
}
