// cgroup v2: one directory <unified>/<parent>/<sandboxId> with the needed controllers enabled on the way
// down, teardown through cgroup.kill, OOM kills counted from memory.events.
import { access, mkdir } from 'node:fs/promises';
import { posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { InternalError } from '@agentfense/protocol';
import {
  TEARDOWN_DEADLINE_MS,
  TEARDOWN_RETRY_MS,
  killPids,
  mkdirOnce,
  readControlSync,
  readPids,
  removeCgroupDir,
  removeParentIfEmpty,
  sharesToWeight,
  whileParentVanishes,
  writeControl,
} from '@agentfense/protocol';
import { ProcsWriter } from './procs-writer.js';
import type { CgroupCreateOptions, SandboxCgroup } from './types.js';

/** The CFS period of cpu.max: the contract's cpuQuota is "µs per 100 ms". */
const CPU_PERIOD_US = 100_000;

/** Parses `oom_kill N` out of memory.events; 0 when absent. */
export function parseMemoryEvents(text: string): number {
  const match = /^oom_kill (\d+)$/m.exec(text);
  return match === null ? 0 : Number(match[1]);
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** Creates the sandbox's v2 cgroup and writes its limits. */
export async function createV2Cgroup(options: CgroupCreateOptions): Promise<SandboxCgroup> {
  const { host, plan, requested, sandboxId, parent, logger } = options;
  if (host.v2 === null) throw new InternalError('cgroup v2 hierarchy vanished');
  const root = host.v2.path;
  const parentDir = posix.join(root, parent);
  const dir = posix.join(parentDir, sandboxId);
  const cgroup = new V2Cgroup(dir, plan.limits, logger);
  try {
    // Controllers must be enabled in every ancestor's subtree_control. We only ever enable them at the
    // hierarchy root and in our own parent directory: v2's "no internal processes" rule forbids enabling
    // them in a cgroup that has processes, which is why sandboxes live under a parent of their own.
    const enable = plan.controllers.map((c) => `+${c}`).join(' ');
    const made = await whileParentVanishes(async () => {
      await mkdir(parentDir, { recursive: true });
      await writeControl(posix.join(root, 'cgroup.subtree_control'), enable);
      await writeControl(posix.join(parentDir, 'cgroup.subtree_control'), enable);
      return mkdirOnce(dir);
    });
    if (made === 'existed') {
      logger.warn({ dir }, 'stale sandbox cgroup found; killing what is left in it');
      await killAll(dir, logger);
    }
    if (plan.limits.memoryBytes !== null && requested.memoryBytes !== undefined) {
      await writeControl(posix.join(dir, 'memory.max'), String(requested.memoryBytes));
      // No swap: otherwise the limit could be escaped by swapping out.
      const swap = posix.join(dir, 'memory.swap.max');
      if (await exists(swap)) await writeControl(swap, '0');
    }
    if (plan.limits.pidsLimit !== null && requested.pidsLimit !== undefined) {
      await writeControl(posix.join(dir, 'pids.max'), String(requested.pidsLimit));
    }
    if (plan.limits.cpuQuota !== null && requested.cpuQuota !== undefined) {
      await writeControl(posix.join(dir, 'cpu.max'), `${requested.cpuQuota} ${CPU_PERIOD_US}`);
    }
    if (plan.limits.cpuShares !== null && requested.cpuShares !== undefined) {
      await writeControl(posix.join(dir, 'cpu.weight'), String(sharesToWeight(requested.cpuShares)));
    }
  } catch (err) {
    await cgroup
      .destroy()
      .catch((cleanupErr: unknown) => logger.warn({ err: cleanupErr }, 'cgroup cleanup after failed create'));
    throw err;
  }
  return cgroup;
}

class V2Cgroup implements SandboxCgroup {
  readonly paths: readonly string[];
  readonly #procs: ProcsWriter;
  #destroyed: Promise<void> | undefined;

  constructor(
    private readonly dir: string,
    readonly limits: SandboxCgroup['limits'],
    private readonly logger: CgroupCreateOptions['logger'],
  ) {
    this.paths = [dir];
    this.#procs = new ProcsWriter([posix.join(dir, 'cgroup.procs')]);
  }

  attach(pid: number): Promise<void> {
    return this.#procs.join(pid);
  }

  // On every command: a synchronous read (readControlSync), errors still as rejections.
  oomKills(): Promise<number> {
    // then(): a failed read is a rejection, as from the asynchronous read it replaces.
    return Promise.resolve().then(() => {
      try {
        return parseMemoryEvents(readControlSync(posix.join(this.dir, 'memory.events')));
      } catch (err) {
        // No memory controller in this cgroup: nothing counts OOM kills.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
        throw err;
      }
    });
  }

  pids(): Promise<number[]> {
    return readPids(posix.join(this.dir, 'cgroup.procs'));
  }

  destroy(): Promise<void> {
    this.#destroyed ??= this.#teardown();
    return this.#destroyed;
  }

  async #teardown(): Promise<void> {
    await this.#procs.close();
    await killAndRemoveV2({ dir: this.dir, logger: this.logger });
  }
}

/** Kills everything in the cgroup: cgroup.kill (kernel >= 5.14) is atomic; otherwise a kill loop. */
async function killAll(dir: string, logger: CgroupCreateOptions['logger']): Promise<void> {
  const kill = posix.join(dir, 'cgroup.kill');
  if (await exists(kill)) await writeControl(kill, '1');
  else killPids(await readPids(posix.join(dir, 'cgroup.procs')), logger);
}

/**
 * Kills every process in a sandbox's v2 cgroup and removes it; resolves the pids that were in it. Shared
 * by a sandbox's own teardown and by recovery after a crashed control plane (create.ts), which knows the
 * directory only by the sandbox id: a directory that does not exist is simply empty.
 */
export async function killAndRemoveV2(options: {
  readonly dir: string;
  readonly logger: CgroupCreateOptions['logger'];
}): Promise<number[]> {
  const { dir, logger } = options;
  const deadline = Date.now() + TEARDOWN_DEADLINE_MS;
  const killed = new Set<number>();
  if (await exists(dir)) {
    for (;;) {
      const pids = await readPids(posix.join(dir, 'cgroup.procs'));
      if (pids.length === 0) break;
      if (Date.now() > deadline)
        throw new InternalError(`sandbox cgroup still has processes ${pids.join(',')} after teardown`);
      for (const pid of pids) killed.add(pid);
      await killAll(dir, logger);
      await sleep(TEARDOWN_RETRY_MS);
    }
  }
  if (!(await removeCgroupDir(dir, deadline))) throw new InternalError(`could not remove cgroup ${dir}`);
  await removeParentIfEmpty(posix.dirname(dir), logger);
  return [...killed];
}
