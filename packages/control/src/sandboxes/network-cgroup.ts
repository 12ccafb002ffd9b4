// The network policy point's own cgroup. A sandbox's policy point is a root process on the host (it
// dials out from the host's namespace), outside the sandbox's cgroups, yet what it does is the sandbox's
// work: every connection, DNS question and byte the agent sends goes through it. Unbounded, one sandbox
// could make its policy point hold the host's memory or a core of CPU that its own limits deny it. Each
// policy point therefore runs in `<hierarchy>/agentfense-network/<sandboxId>` (the memory and cpu
// controllers: one directory on cgroup v2, one per hierarchy on v1) with:
// - memory: `networkMemoryBound` (128 MiB + 1/16 of the sandbox's memory limit); the kernel kills a
//   policy point past it, which ends that sandbox's network only (start.ts says why);
// - CPU: the sandbox's own quota (cpu.max / cfs_quota_us) and weight, so its network work never takes
//   more CPU than the sandbox itself was given.
// A host without the controllers (or a control plane that may not create cgroups) runs policy points
// unbounded, as before, and logs it once; the connection bound (host.ts) holds either way.
import { access } from 'node:fs/promises';
import { posix } from 'node:path';
import type { Logger } from 'pino';
import {
  CPU_PERIOD_US,
  DEFAULT_RESOURCES,
  TEARDOWN_DEADLINE_MS,
  detectCgroupHost,
  killUntilEmpty,
  makeCgroupDir,
  readControlSync,
  removeCgroupDir,
  removeParentIfEmpty,
  sharesToWeight,
  whileParentVanishes,
  writeControl,
} from '@agentfense/protocol';
import type { CgroupHost } from '@agentfense/protocol';
import type { NetworkMemoryOptions } from '@agentfense/network';
import { parseOomKillCount } from '@agentfense/fuse-worker';

/** Directory (under each hierarchy's root) that holds one cgroup per sandbox's policy point. */
export const NETWORK_CGROUP_PARENT = 'agentfense-network';

const MiB = 1024 * 1024;

/**
 * Default base: an idle policy point is ~40 MiB (Node's heap and code; its shared text is charged to
 * whoever read it first), and the connection bound's 512 connections hold at most a chunk and a
 * write buffer each way under back-pressure (~80 KiB), ~40-80 MiB, so 128 MiB carries a full table.
 */
const DEFAULT_BASE_BYTES = 128 * MiB;
/**
 * Default share: a sandbox given more memory runs larger parallel work (builds fetching hundreds of
 * packages), whose TLS and socket buffers grow with it; 1/16 keeps the policy point well below the
 * sandbox itself (384 MiB for the default 4 GiB, 144 MiB for `--memory 256M`).
 */
const DEFAULT_SHARE = 1 / 16;

/**
 * The memory bound of a sandbox's policy point. A sandbox without a memory limit counts as having the
 * default one, so no policy point is unbounded.
 */
export function networkMemoryBound(
  memoryBytes: number | undefined,
  options: NetworkMemoryOptions = {},
): number {
  const base = options.baseBytes ?? DEFAULT_BASE_BYTES;
  const share = options.share ?? DEFAULT_SHARE;
  return Math.floor(base + share * (memoryBytes ?? DEFAULT_RESOURCES.memoryBytes));
}

/** One sandbox's policy point cgroup. */
export interface NetworkCgroup {
  /** Its directories (one on v2; memory's and cpu's on v1). */
  readonly dirs: readonly string[];
  readonly boundBytes: number;
  /** The CPU quota in force (µs per 100 ms), null when the host has no cpu controller. */
  readonly cpuQuota: number | null;
  /** Moves the policy point into it before it opens its listeners. */
  attach(pid: number): Promise<void>;
  /** How many processes the kernel's OOM killer killed in it so far; null if that cannot be read. */
  oomKills(): number | null;
}

/** Where the cgroup lives: v2's one directory, or v1's memory and cpu hierarchies. */
interface Placement {
  readonly version: 1 | 2;
  readonly memory: string | null;
  readonly cpu: string | null;
}

let detected: Promise<CgroupHost> | undefined;

async function placementOf(cgroupRoot: string | undefined): Promise<Placement | null> {
  const host =
    cgroupRoot === undefined
      ? await (detected ??= detectCgroupHost())
      : await detectCgroupHost({ root: cgroupRoot });
  const v2 = host.v2;
  if (v2?.controllers.has('memory') === true) {
    return { version: 2, memory: v2.path, cpu: v2.controllers.has('cpu') ? v2.path : null };
  }
  const memory = host.v1.get('memory') ?? null;
  const cpu = host.v1.get('cpu') ?? null;
  return memory === null && cpu === null ? null : { version: 1, memory, cpu };
}

function dirIn(root: string, sandboxId: string): string {
  // Ids name directories: only a well-formed one is ever joined (never `..` or a path).
  if (!/^sb_[0-9a-f-]+$/.test(sandboxId)) throw new TypeError(`not a sandbox id: ${sandboxId}`);
  return posix.join(root, NETWORK_CGROUP_PARENT, sandboxId);
}

/** Every directory the sandbox's policy point cgroup has on this host (v2 counts once). */
function dirsOf(placement: Placement, sandboxId: string): string[] {
  const roots = new Set([placement.memory, placement.cpu].filter((r): r is string => r !== null));
  return [...roots].map((root) => dirIn(root, sandboxId));
}

let warnedUnbounded = false;

/**
 * Creates the policy point cgroup of `sandboxId` with its bounds written (a stale one a crashed control
 * plane left is emptied and reused). Resolves null when the host offers neither controller or the cgroup
 * cannot be made (a control plane that is not root): the policy point then runs unbounded, logged once.
 */
export async function createNetworkCgroup(options: {
  readonly sandboxId: string;
  readonly boundBytes: number;
  /** The sandbox's CPU quota (µs per 100 ms; default: the default limit) and weight (cpu.shares scale). */
  readonly cpuQuota: number | undefined;
  readonly cpuShares: number | undefined;
  readonly logger: Logger;
  /** Where the hierarchies are mounted (tests); default /sys/fs/cgroup. */
  readonly cgroupRoot?: string;
}): Promise<NetworkCgroup | null> {
  const { logger, boundBytes, sandboxId } = options;
  const cpuQuota = options.cpuQuota ?? DEFAULT_RESOURCES.cpuQuota;
  try {
    const placement = await placementOf(options.cgroupRoot);
    if (placement === null) throw new Error('no cgroup memory or cpu controller on this host');
    const dirs = dirsOf(placement, sandboxId);
    for (const dir of dirs) {
      const made = placement.version === 2 ? await makeV2(placement, dir) : await makeCgroupDir(dir);
      if (made === 'existed') await killUntilEmpty(dir, 'network cgroup', logger);
    }
    const memoryDir = placement.memory === null ? null : dirIn(placement.memory, sandboxId);
    const cpuDir = placement.cpu === null ? null : dirIn(placement.cpu, sandboxId);
    if (memoryDir !== null) await writeMemory(placement.version, memoryDir, boundBytes);
    if (cpuDir !== null) await writeCpu(placement.version, cpuDir, cpuQuota, options.cpuShares);
    const counter =
      memoryDir === null
        ? null
        : posix.join(memoryDir, placement.version === 2 ? 'memory.events' : 'memory.oom_control');
    return {
      dirs,
      boundBytes,
      cpuQuota: cpuDir === null ? null : cpuQuota,
      attach: async (pid) => {
        for (const dir of dirs) await writeControl(posix.join(dir, 'cgroup.procs'), String(pid));
      },
      oomKills: () => {
        if (counter === null) return null;
        try {
          return parseOomKillCount(readControlSync(counter));
        } catch {
          return null; // removed meanwhile
        }
      },
    };
  } catch (err) {
    if (!warnedUnbounded) {
      warnedUnbounded = true;
      logger.warn(
        { err },
        'network policy points run without memory and CPU bounds: their cgroup could not be made',
      );
    }
    return null;
  }
}

async function writeMemory(version: 1 | 2, dir: string, boundBytes: number): Promise<void> {
  if (version === 2) {
    await writeControl(posix.join(dir, 'memory.max'), String(boundBytes));
    await writeControl(posix.join(dir, 'memory.swap.max'), '0').catch(() => undefined);
    return;
  }
  await writeControl(posix.join(dir, 'memory.limit_in_bytes'), String(boundBytes));
  // Without swap accounting there is nothing more to bound; with it, swap must not extend the bound.
  await writeControl(posix.join(dir, 'memory.memsw.limit_in_bytes'), String(boundBytes)).catch(
    () => undefined,
  );
}

/** cgroup v1 cpu.shares (2..262144) to v2 cpu.weight (1..10000), as runtime-bwrap and runc do. */

async function writeCpu(
  version: 1 | 2,
  dir: string,
  quota: number,
  shares: number | undefined,
): Promise<void> {
  if (version === 2) {
    await writeControl(posix.join(dir, 'cpu.max'), `${quota} ${CPU_PERIOD_US}`);
    if (shares !== undefined)
      await writeControl(posix.join(dir, 'cpu.weight'), String(sharesToWeight(shares)));
    return;
  }
  await writeControl(posix.join(dir, 'cpu.cfs_period_us'), String(CPU_PERIOD_US));
  await writeControl(posix.join(dir, 'cpu.cfs_quota_us'), String(quota));
  if (shares !== undefined) await writeControl(posix.join(dir, 'cpu.shares'), String(shares));
}

/** v2: the controllers enabled on the way down (root and our parent only), then the sandbox's directory. */
function makeV2(placement: Placement, dir: string): Promise<'created' | 'existed'> {
  const root = posix.dirname(posix.dirname(dir));
  const enable = ['+memory', ...(placement.cpu === null ? [] : ['+cpu'])].join(' ');
  return whileParentVanishes(async () => {
    await writeControl(posix.join(root, 'cgroup.subtree_control'), enable);
    const made = await makeCgroupDir(dir);
    await writeControl(posix.join(posix.dirname(dir), 'cgroup.subtree_control'), enable);
    return made;
  });
}

/**
 * Kills what is left in the policy point cgroup of `sandboxId` and removes it, in every hierarchy: after
 * its policy point stopped, and whenever a sandbox's mounts are cleared (before a start, after a stop,
 * recovery, gc, destroy), so what a crashed control plane left goes too. Idempotent.
 */
export async function removeNetworkCgroup(options: {
  readonly sandboxId: string;
  readonly logger: Logger;
  readonly cgroupRoot?: string;
}): Promise<void> {
  const placement = await placementOf(options.cgroupRoot).catch(() => null);
  if (placement === null || !/^sb_[0-9a-f-]+$/.test(options.sandboxId)) return;
  for (const dir of dirsOf(placement, options.sandboxId)) {
    if (!(await exists(dir))) continue;
    await killUntilEmpty(dir, 'network cgroup', options.logger);
    if (!(await removeCgroupDir(dir, Date.now() + TEARDOWN_DEADLINE_MS)))
      throw new Error(`could not remove the network cgroup ${dir}`);
    await removeParentIfEmpty(posix.dirname(dir), options.logger);
  }
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
