// Finds the cgroup hierarchies of this host (for the sandboxes' cgroups in runtime-bwrap and the workers'
// in control): a v2 (unified) hierarchy with its controllers, and the v1 hierarchies by controller. Reads
// only the filesystem under `root`, so tests can point it at a fake tree.
import { access, readFile } from 'node:fs/promises';
import { posix } from 'node:path';

/** The controllers AgentFense uses: limits (memory, pids, cpu) and teardown (freezer, v1 only). */
export type CgroupController = 'memory' | 'pids' | 'cpu' | 'freezer';

/** What the host offers. */
export interface CgroupHost {
  /** The unified hierarchy, if mounted, with the controllers available at its root. */
  readonly v2: { readonly path: string; readonly controllers: ReadonlySet<string> } | null;
  /** v1 hierarchies by controller (e.g. memory -> /sys/fs/cgroup/memory). */
  readonly v1: ReadonlyMap<CgroupController, string>;
}

const V1_CONTROLLERS: readonly CgroupController[] = ['memory', 'pids', 'cpu', 'freezer'];

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** Detects the hierarchies under `root` (default /sys/fs/cgroup): pure v2, hybrid (v2 at ./unified) or v1. */
export async function detectCgroupHost(options: { readonly root?: string } = {}): Promise<CgroupHost> {
  const root = options.root ?? '/sys/fs/cgroup';
  let v2: CgroupHost['v2'] = null;
  for (const candidate of [root, posix.join(root, 'unified')]) {
    const file = posix.join(candidate, 'cgroup.controllers');
    if (await exists(file)) {
      const text = await readFile(file, 'utf8');
      v2 = { path: candidate, controllers: new Set(text.split(/\s+/).filter((c) => c.length > 0)) };
      break;
    }
  }
  const v1 = new Map<CgroupController, string>();
  for (const controller of V1_CONTROLLERS) {
    const dir = posix.join(root, controller);
    // A v1 hierarchy has cgroup.procs but no cgroup.controllers (that file marks a v2 hierarchy).
    if (
      (await exists(posix.join(dir, 'cgroup.procs'))) &&
      !(await exists(posix.join(dir, 'cgroup.controllers')))
    ) {
      v1.set(controller, dir);
    }
  }
  return { v2, v1 };
}
