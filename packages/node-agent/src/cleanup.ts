// What a previous run of the agent left: its workers ended with it (their control connections closed) or
// linger, their FUSE mounts are dead or still there, af-init's directories are stale. On start the agent
// kills those workers (and whatever is left in their memory cgroups, which go too), clears those mounts and
// directories for every sandbox it holds, then asks which of
// those sandboxes are still placed on this node (findLeftovers, the returning-node rule): the others'
// directories go entirely, delta included; the placed ones keep their delta for the next attach.
import { readFile, readdir, rm } from 'node:fs/promises';
import { posix } from 'node:path';
import { clearFuseMount, removeTree, removeWorkerCgroup } from '@agentfense/fuse-worker';
import type { Orchestrator } from '@agentfense/orchestrator';
import { findLeftovers } from '@agentfense/orchestrator';
import { isSameProcess, type RuntimeLogger } from '@agentfense/protocol';
import { LAUNCHER_DIR_PREFIX } from '@agentfense/runtime-docker';
import { sandboxPaths, sandboxesDir } from './paths.js';

/** What the clean-up did. */
export interface CleanupReport {
  /** Sandboxes whose directories went (not placed here any more). */
  readonly removed: readonly string[];
  /** Sandboxes still placed here: their delta is kept. */
  readonly kept: readonly string[];
  /** Worker processes of the previous run that were still alive and were killed. */
  readonly killedWorkers: number;
  /** FUSE mounts cleared. */
  readonly clearedMounts: number;
}

async function killLeftWorker(pidFile: string): Promise<boolean> {
  const text = await readFile(pidFile, 'utf8').catch(() => null);
  if (text === null) return false;
  const [pid, start] = text.trim().split(' ');
  const n = Number(pid);
  // Only the very process recorded (pid and start time): a reused pid is someone else's.
  if (!Number.isSafeInteger(n) || n <= 1 || !isSameProcess(n, start ?? null)) return false;
  try {
    process.kill(n, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}

export async function cleanUpLeftovers(options: {
  readonly stateDir: string;
  readonly nodeName: string;
  readonly orchestrator: Pick<Orchestrator, 'locate'>;
  readonly logger: RuntimeLogger;
}): Promise<CleanupReport> {
  const held = await readdir(sandboxesDir(options.stateDir)).catch(() => [] as string[]);
  let killedWorkers = 0;
  let clearedMounts = 0;
  for (const id of held) {
    const paths = sandboxPaths(options.stateDir, id);
    if (await killLeftWorker(paths.workerPid)) killedWorkers++;
    await removeWorkerCgroup({ sandboxId: id, logger: options.logger }).catch((err: unknown) =>
      options.logger.warn({ err, sandboxId: id }, 'could not remove a worker cgroup left by the last run'),
    );
    clearedMounts += await clearFuseMount(paths.view);
    await rm(paths.workerPid, { force: true });
    for (const entry of await readdir(paths.dir).catch(() => [] as string[])) {
      if (entry.startsWith(LAUNCHER_DIR_PREFIX))
        await rm(posix.join(paths.dir, entry), { recursive: true, force: true });
    }
  }
  const removed = await findLeftovers(options.orchestrator, options.nodeName, held);
  for (const id of removed) await removeTree(sandboxPaths(options.stateDir, id).dir);
  return { removed, kept: held.filter((id) => !removed.includes(id)), killedWorkers, clearedMounts };
}
