// The worker's own memory cgroup, made by whoever spawns it (the control plane, a cluster node's agent).
// A sandbox's worker is a root process outside the sandbox's cgroups (it
// serves the mount the sandbox's commands use), so what the sandbox makes it hold (names, listings,
// metadata of a deep tree) was charged to nobody and bounded by nothing but the host: 1,200 nested
// directories of 255-character names took one worker to 876 MiB. Each sandbox's worker now runs in
// `<memory hierarchy>/agentfense-workers/<sandboxId>` with a bound derived from the sandbox's own memory
// limit (workerMemoryBound). The kernel OOM-kills a worker past it; supervision restarts it and says why,
// and repeated kills put the sandbox in ERROR with that reason: the control plane and other sandboxes
// carry on. A host without a memory controller (or a control plane that may not create cgroups) runs
// workers unbounded, as before, and logs it once.
import { posix } from 'node:path';
import {
  DEFAULT_RESOURCES,
  TEARDOWN_DEADLINE_MS,
  detectCgroupHost,
  killUntilEmpty,
  makeCgroupDir,
  readControlSync,
  removeCgroupDir,
  removeParentIfEmpty,
  whileParentVanishes,
  writeControl,
} from '@agentfense/protocol';
import type { CgroupHost, RuntimeLogger } from '@agentfense/protocol';

/** Directory (under the memory hierarchy's root) that holds one cgroup per sandbox's worker. */
export const WORKER_CGROUP_PARENT = 'agentfense-workers';

const MiB = 1024 * 1024;

/** The worker memory bound's parts: `baseBytes + share x the sandbox's memory limit`. */
export interface WorkerMemoryOptions {
  /** What any worker may use whatever its sandbox's limit (default 256 MiB). */
  readonly baseBytes?: number;
  /** The part of the sandbox's memory limit added to it (default 0.5). */
  readonly share?: number;
}

/**
 * Default base: an idle worker is ~50 MiB RSS (most of it node's shared text), a walk of a 100,000-entry
 * tree adds ~100 MiB (docs/decisions.md, "Worker state per known entry is kept compact").
 */
const DEFAULT_BASE_BYTES = 256 * MiB;
/** Default share: a sandbox given more memory works on larger trees, which its worker then holds. */
const DEFAULT_SHARE = 0.5;

/**
 * The memory bound of a sandbox's worker: `base + share x memoryBytes` (256 MiB + half the sandbox's
 * memory limit by default: 384 MiB for `--memory 256M`, 2.25 GiB for the default 4 GiB). A sandbox
 * without a memory limit counts as having the default one, so no worker is unbounded.
 */
export function workerMemoryBound(
  memoryBytes: number | undefined,
  options: WorkerMemoryOptions = {},
): number {
  const base = options.baseBytes ?? DEFAULT_BASE_BYTES;
  const share = options.share ?? DEFAULT_SHARE;
  return Math.floor(base + share * (memoryBytes ?? DEFAULT_RESOURCES.memoryBytes));
}

/** One sandbox's worker cgroup. */
export interface WorkerCgroup {
  /** Its directory (tests read memory.limit_in_bytes / memory.max there). */
  readonly dir: string;
  readonly boundBytes: number;
  /** Moves a worker into it before the worker mounts (what it allocates from then on is charged here). */
  attach(pid: number): Promise<void>;
  /** How many processes the kernel's OOM killer killed in it so far; null if that cannot be read. */
  oomKills(): number | null;
}

/** Where a worker cgroup lives: the memory controller's hierarchy and its version. */
interface MemoryHierarchy {
  readonly root: string;
  readonly version: 1 | 2;
}

let detected: Promise<CgroupHost> | undefined;

async function memoryHierarchy(cgroupRoot: string | undefined): Promise<MemoryHierarchy | null> {
  const host =
    cgroupRoot === undefined
      ? await (detected ??= detectCgroupHost())
      : await detectCgroupHost({ root: cgroupRoot });
  if (host.v2?.controllers.has('memory') === true) return { root: host.v2.path, version: 2 };
  const v1 = host.v1.get('memory');
  return v1 === undefined ? null : { root: v1, version: 1 };
}

function dirOf(hierarchy: MemoryHierarchy, sandboxId: string): string {
  // Ids name directories: only a well-formed one is ever joined (never `..` or a path).
  if (!/^sb_[0-9a-f-]+$/.test(sandboxId)) throw new TypeError(`not a sandbox id: ${sandboxId}`);
  return posix.join(hierarchy.root, WORKER_CGROUP_PARENT, sandboxId);
}

/** The `oom_kill N` counter of memory.oom_control (v1) or memory.events (v2). */
export function parseOomKillCount(text: string): number | null {
  const match = /^oom_kill (\d+)$/m.exec(text);
  return match === null ? null : Number(match[1]);
}

let warnedUnbounded = false;

/**
 * Creates the worker cgroup of `sandboxId` with its bound written (a stale one a crashed control plane
 * left is emptied and reused). Resolves null when the host offers no memory controller or the cgroup
 * cannot be made (a control plane that is not root): the worker then runs unbounded, which is logged once.
 */
export async function createWorkerCgroup(options: {
  readonly sandboxId: string;
  readonly boundBytes: number;
  readonly logger: RuntimeLogger;
  /** Where the hierarchies are mounted (tests); default /sys/fs/cgroup. */
  readonly cgroupRoot?: string;
}): Promise<WorkerCgroup | null> {
  const { logger, boundBytes } = options;
  try {
    const hierarchy = await memoryHierarchy(options.cgroupRoot);
    if (hierarchy === null) throw new Error('no cgroup memory controller on this host');
    const dir = dirOf(hierarchy, options.sandboxId);
    const made = hierarchy.version === 2 ? await makeV2(hierarchy.root, dir) : await makeCgroupDir(dir);
    if (made === 'existed') await killUntilEmpty(dir, 'worker cgroup', logger);
    if (hierarchy.version === 2) {
      await writeControl(posix.join(dir, 'memory.max'), String(boundBytes));
      await writeControl(posix.join(dir, 'memory.swap.max'), '0').catch(() => undefined);
    } else {
      await writeControl(posix.join(dir, 'memory.limit_in_bytes'), String(boundBytes));
      // Without swap accounting there is nothing more to bound; with it, swap must not extend the bound.
      await writeControl(posix.join(dir, 'memory.memsw.limit_in_bytes'), String(boundBytes)).catch(
        () => undefined,
      );
    }
    const counter = posix.join(dir, hierarchy.version === 2 ? 'memory.events' : 'memory.oom_control');
    return {
      dir,
      boundBytes,
      attach: (pid) => writeControl(posix.join(dir, 'cgroup.procs'), String(pid)),
      oomKills: () => {
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
      logger.warn({ err }, 'sandbox workers run without a memory bound: their cgroup could not be made');
    }
    return null;
  }
}

/** v2: the memory controller enabled on the way down, then the worker's directory. */
function makeV2(root: string, dir: string): Promise<'created' | 'existed'> {
  const parent = posix.dirname(dir);
  return whileParentVanishes(async () => {
    await writeControl(posix.join(root, 'cgroup.subtree_control'), '+memory');
    const made = await makeCgroupDir(dir);
    await writeControl(posix.join(parent, 'cgroup.subtree_control'), '+memory');
    return made;
  });
}

/**
 * Kills what is left in the worker cgroup of `sandboxId` and removes it (after its worker stopped; and when
 * a sandbox's mounts are cleared, so recovery, gc and destroy remove what a crashed control plane left).
 * Idempotent; nothing to do on a host without the controller.
 */
export async function removeWorkerCgroup(options: {
  readonly sandboxId: string;
  readonly logger: RuntimeLogger;
  readonly cgroupRoot?: string;
}): Promise<void> {
  const hierarchy = await memoryHierarchy(options.cgroupRoot).catch(() => null);
  if (hierarchy === null || !/^sb_[0-9a-f-]+$/.test(options.sandboxId)) return;
  const dir = dirOf(hierarchy, options.sandboxId);
  await killUntilEmpty(dir, 'worker cgroup', options.logger);
  if (!(await removeCgroupDir(dir, Date.now() + TEARDOWN_DEADLINE_MS)))
    throw new Error(`could not remove the worker cgroup ${dir}`);
  await removeParentIfEmpty(posix.dirname(dir), options.logger);
}
