// cgroup v1: one directory per controller hierarchy (<hierarchy>/<parent>/<sandboxId>), a freezer for
// race-free teardown, OOM kills counted from memory.oom_control.
import { access, readFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { InternalError } from '@agentfense/protocol';
import type { CgroupController } from '@agentfense/protocol';
import {
  TEARDOWN_DEADLINE_MS,
  TEARDOWN_RETRY_MS,
  killPids,
  makeCgroupDir,
  readControlSync,
  readPids,
  removeCgroupDir,
  removeParentIfEmpty,
  writeControl,
} from '@agentfense/protocol';
import { ProcsWriter } from './procs-writer.js';
import type { CgroupCreateOptions, SandboxCgroup } from './types.js';

/** The CFS period we express quotas against: the contract's cpuQuota is "µs per 100 ms". */
const CFS_PERIOD_US = 100_000;

/** Parses `oom_kill N` out of memory.oom_control (kernel >= 4.13); 0 when absent. */
export function parseOomControl(text: string): number {
  const match = /^oom_kill (\d+)$/m.exec(text);
  return match === null ? 0 : Number(match[1]);
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** Creates the sandbox's v1 cgroups and writes its limits. */
export async function createV1Cgroup(options: CgroupCreateOptions): Promise<SandboxCgroup> {
  const { host, plan, requested, sandboxId, parent, logger } = options;
  const dirs = new Map<CgroupController, string>();
  for (const controller of plan.controllers) {
    const hierarchy = host.v1.get(controller);
    if (hierarchy === undefined) throw new InternalError(`cgroup v1 hierarchy ${controller} vanished`);
    dirs.set(controller, posix.join(hierarchy, parent, sandboxId));
  }
  const cgroup = new V1Cgroup(dirs, plan.limits, logger);
  // One hierarchy does not wait for another: each directory, then each controller's limits, in parallel
  // (a start pays the longest chain of file operations, not their sum). allSettled: nothing is still
  // being created while a failure is cleaned up below.
  const inParallel = async (steps: readonly Promise<void>[]): Promise<void> => {
    for (const result of await Promise.allSettled(steps)) {
      if (result.status === 'rejected') throw result.reason;
    }
  };
  try {
    await inParallel(
      [...dirs.values()].map(async (dir) => {
        if ((await makeCgroupDir(dir)) === 'existed') {
          // A cgroup left by a crashed control plane for the same sandbox id: empty it and reuse it.
          logger.warn({ dir }, 'stale sandbox cgroup found; killing what is left in it');
          killPids(await readPids(posix.join(dir, 'cgroup.procs')), logger);
        }
      }),
    );
    const memory = dirs.get('memory');
    const pids = dirs.get('pids');
    const cpu = dirs.get('cpu');
    await inParallel([
      (async () => {
        if (memory === undefined || requested.memoryBytes === undefined) return;
        await writeControl(posix.join(memory, 'memory.limit_in_bytes'), String(requested.memoryBytes));
        // Without this the command could exceed the limit by pushing pages to swap (if the host has any).
        const memsw = posix.join(memory, 'memory.memsw.limit_in_bytes');
        if (await exists(memsw)) await writeControl(memsw, String(requested.memoryBytes));
      })(),
      (async () => {
        if (pids === undefined || requested.pidsLimit === undefined) return;
        await writeControl(posix.join(pids, 'pids.max'), String(requested.pidsLimit));
      })(),
      (async () => {
        if (cpu === undefined) return;
        if (requested.cpuQuota !== undefined) {
          await writeControl(posix.join(cpu, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
          await writeControl(posix.join(cpu, 'cpu.cfs_quota_us'), String(requested.cpuQuota));
        }
        if (requested.cpuShares !== undefined) {
          await writeControl(posix.join(cpu, 'cpu.shares'), String(requested.cpuShares));
        }
      })(),
    ]);
  } catch (err) {
    // Never leave half-created cgroups behind: remove what exists, then report the original failure.
    await cgroup
      .destroy()
      .catch((cleanupErr: unknown) => logger.warn({ err: cleanupErr }, 'cgroup cleanup after failed create'));
    throw err;
  }
  return cgroup;
}

class V1Cgroup implements SandboxCgroup {
  readonly paths: readonly string[];
  readonly #procs: ProcsWriter;
  #destroyed: Promise<void> | undefined;

  constructor(
    private readonly dirs: ReadonlyMap<CgroupController, string>,
    readonly limits: SandboxCgroup['limits'],
    private readonly logger: CgroupCreateOptions['logger'],
  ) {
    this.paths = [...dirs.values()];
    this.#procs = new ProcsWriter(this.paths.map((dir) => posix.join(dir, 'cgroup.procs')));
  }

  attach(pid: number): Promise<void> {
    // v1 cgroup.procs takes one pid per write; one write per hierarchy, in parallel (fs.ts).
    return this.#procs.join(pid);
  }

  // On every command: a synchronous read (readControlSync), errors still as rejections.
  oomKills(): Promise<number> {
    const memory = this.dirs.get('memory');
    if (memory === undefined) return Promise.resolve(0);
    // then(): a failed read is a rejection, as from the asynchronous read it replaces.
    return Promise.resolve().then(() =>
      parseOomControl(readControlSync(posix.join(memory, 'memory.oom_control'))),
    );
  }

  async pids(): Promise<number[]> {
    const all = await Promise.all(this.paths.map((dir) => readPids(posix.join(dir, 'cgroup.procs'))));
    return [...new Set(all.flat())];
  }

  destroy(): Promise<void> {
    this.#destroyed ??= this.#teardown();
    return this.#destroyed;
  }

  async #teardown(): Promise<void> {
    await this.#procs.close();
    await killAndRemoveV1({ dirs: this.paths, freezer: this.dirs.get('freezer'), logger: this.logger });
  }
}

/**
 * Kills every process in a sandbox's v1 cgroups and removes them; resolves the pids it killed. Shared by
 * a sandbox's own teardown and by recovery after a crashed control plane (create.ts), which knows the
 * directories only by the sandbox id: a directory that does not exist is simply empty.
 * Kill loop: freeze (so nothing forks between reading cgroup.procs and killing), SIGKILL every pid, thaw
 * (frozen processes only die once thawed; this also thaws a tree a teardown that died half-way left
 * frozen), and repeat until every cgroup is empty.
 */
export async function killAndRemoveV1(options: {
  readonly dirs: readonly string[];
  /** The sandbox's freezer cgroup, when the host has that hierarchy. */
  readonly freezer: string | undefined;
  readonly logger: CgroupCreateOptions['logger'];
}): Promise<number[]> {
  const dirs = [...new Set(options.dirs)];
  const deadline = Date.now() + TEARDOWN_DEADLINE_MS;
  const pidsIn = async (): Promise<number[]> => {
    const all = await Promise.all(dirs.map((dir) => readPids(posix.join(dir, 'cgroup.procs'))));
    return [...new Set(all.flat())];
  };
  // Without its freezer cgroup (none on this host, or already removed) the loop still kills, unfrozen.
  const freezer =
    options.freezer !== undefined && (await exists(posix.join(options.freezer, 'freezer.state')))
      ? options.freezer
      : undefined;
  const killed = new Set<number>();
  for (;;) {
    const pids = await pidsIn();
    if (pids.length === 0) break;
    if (Date.now() > deadline)
      throw new InternalError(`sandbox cgroup still has processes ${pids.join(',')} after teardown`);
    if (freezer !== undefined) await freeze(freezer, deadline);
    const frozen = await pidsIn();
    for (const pid of frozen) killed.add(pid);
    killPids(frozen, options.logger);
    if (freezer !== undefined) await writeControl(posix.join(freezer, 'freezer.state'), 'THAWED');
    await sleep(TEARDOWN_RETRY_MS);
  }
  for (const dir of dirs) {
    if (!(await removeCgroupDir(dir, deadline))) throw new InternalError(`could not remove cgroup ${dir}`);
    await removeParentIfEmpty(posix.dirname(dir), options.logger);
  }
  return [...killed];
}

async function freeze(freezer: string, deadline: number): Promise<void> {
  const state = posix.join(freezer, 'freezer.state');
  await writeControl(state, 'FROZEN');
  // Freezing is asynchronous (FREEZING until every task stopped); wait for it, bounded by the deadline.
  while ((await readFile(state, 'utf8')).trim() !== 'FROZEN' && Date.now() < deadline) {
    await sleep(1);
  }
}
