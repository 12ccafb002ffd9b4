// Cgroup planning (which version, which limits hold), host detection on fake trees, and the parsers.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidArgumentError, NO_LIMITS } from '@agentfense/protocol';
import { execa } from 'execa';
import { createSandboxCgroup } from '../src/cgroups/create.js';
import type { CgroupController, CgroupHost } from '@agentfense/protocol';
import { detectCgroupHost, makeCgroupDir } from '@agentfense/protocol';
import { planCgroups, validateLimits } from '../src/cgroups/plan.js';
import { parseOomControl } from '../src/cgroups/v1.js';
import { sharesToWeight } from '@agentfense/protocol';
import { parseMemoryEvents } from '../src/cgroups/v2.js';

const quiet = { debug: () => undefined, warn: () => undefined };

function host(v2: string[] | null, v1: CgroupController[]): CgroupHost {
  return {
    v2: v2 === null ? null : { path: '/cg/unified', controllers: new Set(v2) },
    v1: new Map(v1.map((c) => [c, `/cg/${c}`])),
  };
}

describe('planCgroups', () => {
  it('enforces nothing when nothing is asked for', () => {
    expect(planCgroups(host(['memory', 'pids', 'cpu'], []), {})).toEqual({
      mechanism: 'none',
      controllers: [],
      limits: NO_LIMITS,
    });
  });

  it('uses v2 when the unified hierarchy has every needed controller', () => {
    const plan = planCgroups(host(['memory', 'pids', 'cpu'], ['memory', 'pids', 'freezer']), {
      memoryBytes: 1 << 26,
      pidsLimit: 10,
    });
    expect(plan.mechanism).toBe('cgroup-v2');
    expect(plan.controllers).toEqual(['memory', 'pids']);
    expect(plan.limits).toEqual({
      memoryBytes: 1 << 26,
      pidsLimit: 10,
      cpuQuota: null,
      cpuShares: null,
      mechanism: 'cgroup-v2',
    });
  });

  it('falls back to v1 (plus the freezer) on hybrid hosts whose v2 lacks memory/pids, like this one', () => {
    const plan = planCgroups(host(['hugetlb'], ['memory', 'pids', 'cpu', 'freezer']), {
      memoryBytes: 1 << 26,
      pidsLimit: 10,
      cpuQuota: 50_000,
    });
    expect(plan.mechanism).toBe('cgroup-v1');
    expect(plan.controllers).toEqual(['memory', 'pids', 'cpu', 'freezer']);
    expect(plan.limits).toEqual({
      memoryBytes: 1 << 26,
      pidsLimit: 10,
      cpuQuota: 50_000,
      cpuShares: null,
      mechanism: 'cgroup-v1',
    });
  });

  it('reports a limit whose controller is missing as null, never as enforced', () => {
    const plan = planCgroups(host(null, ['memory']), { memoryBytes: 1 << 26, pidsLimit: 10, cpuShares: 512 });
    expect(plan.limits).toEqual({
      memoryBytes: 1 << 26,
      pidsLimit: null,
      cpuQuota: null,
      cpuShares: null,
      mechanism: 'cgroup-v1',
    });
    expect(planCgroups(host(null, []), { pidsLimit: 10 }).limits).toEqual(NO_LIMITS);
  });
});

describe('validateLimits', () => {
  it.each([
    { memoryBytes: 0 },
    { memoryBytes: 1.5e6 + 0.5 },
    { pidsLimit: 0 },
    { cpuQuota: 999 },
    { cpuShares: 1 },
    { pidsLimit: Number.NaN },
  ])('rejects %j', (limits) => {
    expect(() => validateLimits(limits)).toThrow(InvalidArgumentError);
  });
  it('accepts sensible limits', () => {
    expect(() =>
      validateLimits({ memoryBytes: 64 << 20, pidsLimit: 64, cpuQuota: 50_000, cpuShares: 1024 }),
    ).not.toThrow();
  });
});

describe('detectCgroupHost', () => {
  let root: string | undefined;
  afterEach(async () => {
    if (root !== undefined) await rm(root, { recursive: true, force: true });
    root = undefined;
  });

  it('finds a hybrid layout: v2 at ./unified with its controllers, v1 hierarchies by controller', async () => {
    root = await mkdtemp(join(tmpdir(), 'af-cg-'));
    await mkdir(join(root, 'unified'));
    await writeFile(join(root, 'unified', 'cgroup.controllers'), 'hugetlb\n');
    for (const c of ['memory', 'pids', 'freezer']) {
      await mkdir(join(root, c));
      await writeFile(join(root, c, 'cgroup.procs'), '');
    }
    const found = await detectCgroupHost({ root });
    expect(found.v2?.path).toBe(join(root, 'unified'));
    expect([...(found.v2?.controllers ?? [])]).toEqual(['hugetlb']);
    expect([...found.v1.keys()]).toEqual(['memory', 'pids', 'freezer']);
  });

  it('finds a pure v2 layout at the root', async () => {
    root = await mkdtemp(join(tmpdir(), 'af-cg-'));
    await writeFile(join(root, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    const found = await detectCgroupHost({ root });
    expect(found.v2?.path).toBe(root);
    expect(found.v2?.controllers.has('memory')).toBe(true);
    expect(found.v1.size).toBe(0);
  });

  it('creates no cgroup when no limit is requested', async () => {
    root = await mkdtemp(join(tmpdir(), 'af-cg-'));
    expect(await createSandboxCgroup({ sandboxId: 'sb_x', limits: {}, root, logger: quiet })).toBeNull();
  });

  it('refuses a cgroup parent that escapes the hierarchy', async () => {
    await expect(
      createSandboxCgroup({ sandboxId: 'sb_x', limits: { pidsLimit: 5 }, parent: '../x', logger: quiet }),
    ).rejects.toThrow(InvalidArgumentError);
    await expect(
      createSandboxCgroup({ sandboxId: 'sb_x', limits: { pidsLimit: 5 }, parent: '/abs', logger: quiet }),
    ).rejects.toThrow(InvalidArgumentError);
  });
});

describe('parsers', () => {
  it('reads oom_kill counters', () => {
    expect(parseOomControl('oom_kill_disable 0\nunder_oom 0\noom_kill 3\n')).toBe(3);
    expect(parseOomControl('oom_kill_disable 0\nunder_oom 0\n')).toBe(0);
    expect(parseMemoryEvents('low 0\nhigh 0\nmax 5\noom 2\noom_kill 2\noom_group_kill 0\n')).toBe(2);
  });
  it('converts cpu.shares to cpu.weight like runc', () => {
    expect(sharesToWeight(2)).toBe(1);
    expect(sharesToWeight(1024)).toBe(39);
    expect(sharesToWeight(262144)).toBe(10000);
  });
});

describe('makeCgroupDir', () => {
  it("survives the shared parent being removed and made again meanwhile (another sandbox's stop)", async () => {
    const root = await mkdtemp(join(tmpdir(), 'af-cgdir-'));
    const parent = join(root, 'agentfense');
    // Another control plane's sandboxes: the parent is made and removed as fast as the host allows (its
    // last sandbox's stop removes it, the next start makes it again). Node's recursive mkdir meets an
    // EEXIST for the parent, stats it, and gets ENOENT when it was removed in between.
    const churn = execa('sh', [
      '-c',
      `while :; do mkdir "${parent}" 2>/dev/null; rmdir "${parent}" 2>/dev/null; done`,
    ]);
    try {
      for (let i = 0; i < 300; i++) {
        const dir = join(parent, `sb_${i}`);
        expect(await makeCgroupDir(dir)).toBe('created');
        await rm(dir, { recursive: true, force: true });
      }
    } finally {
      churn.kill('SIGKILL');
      await churn.catch(() => undefined);
      await rm(root, { recursive: true, force: true });
    }
  }, 60_000);
});
