// planLimits: a limit is reported only when the engine enforces it; mechanism follows.
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '@agentfense/protocol';
import { parseEngineCapabilities, planLimits } from '../src/container/limits.js';
import { validateLimits } from '../src/validate.js';

const all = { memoryLimit: true, swapLimit: true, pidsLimit: true, cpuCfsQuota: true, cpuShares: true };

describe('planLimits', () => {
  it('reports every requested limit the engine supports, with mechanism docker', () => {
    expect(planLimits({ memoryBytes: 1 << 26, pidsLimit: 10 }, all)).toEqual({
      memoryBytes: 1 << 26,
      pidsLimit: 10,
      cpuQuota: null,
      cpuShares: null,
      mechanism: 'docker',
    });
  });

  it('never claims a limit the engine cannot enforce', () => {
    const noPids = { ...all, pidsLimit: false };
    expect(planLimits({ pidsLimit: 10 }, noPids)).toMatchObject({ pidsLimit: null, mechanism: 'none' });
    expect(planLimits({}, all).mechanism).toBe('none');
  });

  it('reads the capability flags of docker info', () => {
    expect(
      parseEngineCapabilities({
        MemoryLimit: true,
        SwapLimit: false,
        PidsLimit: true,
        CpuCfsQuota: true,
        CPUShares: true,
      }),
    ).toEqual({ ...all, swapLimit: false });
  });

  it('refuses limits docker would refuse', () => {
    expect(() => validateLimits({ memoryBytes: 1024 })).toThrow(InvalidArgumentError);
    expect(() => validateLimits({ cpuQuota: 10 })).toThrow(InvalidArgumentError);
    expect(() => validateLimits({ pidsLimit: 1.5 })).toThrow(InvalidArgumentError);
    expect(() => validateLimits({ memoryBytes: 64 << 20, pidsLimit: 1, cpuShares: 2 })).not.toThrow();
  });
});
