// Small filesystem operations on cgroup directories: the sandboxes' (runtime-bwrap, v1 and v2) and the
// workers' (control). Each writes or reads one control file the way the kernel expects.
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RuntimeLogger } from '../logger.js';

/** How long teardown keeps retrying (killing, then rmdir) before it gives up and reports the leak. */
export const TEARDOWN_DEADLINE_MS = 5_000;
/** Pause between teardown rounds: SIGKILLed processes need a scheduler tick or two to be reaped. */
export const TEARDOWN_RETRY_MS = 10;

/** Writes one value to a cgroup control file (one write(2), as the kernel expects). */
export async function writeControl(path: string, value: string): Promise<void> {
  await writeFile(path, value);
}

/**
 * Reads a cgroup control file synchronously: for counters read on every command (the OOM kill count).
 * cgroupfs answers reads from memory in microseconds; an fs/promises read is four thread-pool round trips
 * (open, fstat, read, close), each a wake-up of the event loop.
 */
export function readControlSync(path: string): string {
  return readFileSync(path, 'utf8');
}

/** The pids listed in a cgroup.procs file (in our pid namespace); [] if the cgroup is gone. */
export async function readPids(procsFile: string): Promise<number[]> {
  try {
    const text = await readFile(procsFile, 'utf8');
    return text
      .split('\n')
      .filter((line) => line.length > 0)
      .map(Number);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/** SIGKILLs each pid; a pid that is already gone (ESRCH) is fine. */
export function killPids(pids: readonly number[], logger: RuntimeLogger): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      logger.debug({ pid }, 'process exited before teardown killed it');
    }
  }
}

/**
 * SIGKILLs what is in cgroup `dir` until it is empty, or throws after TEARDOWN_DEADLINE_MS (`what` names the
 * cgroup in that error). For a cgroup of host processes (a worker, a policy point), not a sandbox's tree.
 */
export async function killUntilEmpty(dir: string, what: string, logger: RuntimeLogger): Promise<void> {
  const deadline = Date.now() + TEARDOWN_DEADLINE_MS;
  for (;;) {
    const pids = await readPids(posix.join(dir, 'cgroup.procs'));
    if (pids.length === 0) return;
    if (Date.now() > deadline) throw new Error(`${what} ${dir} still has processes ${pids.join(',')}`);
    killPids(pids, logger);
    await sleep(TEARDOWN_RETRY_MS);
  }
}

/** cgroup v1 cpu.shares (2..262144, default 1024) to v2 cpu.weight (1..10000, default 100), as runc does. */
export function sharesToWeight(shares: number): number {
  return 1 + Math.floor(((shares - 2) * 9999) / 262142);
}

/**
 * Removes a cgroup directory, retrying while the kernel still reports it busy (processes that were just
 * killed leave the cgroup asynchronously). Resolves true once it is gone (or never existed).
 */
export async function removeCgroupDir(dir: string, deadline: number): Promise<boolean> {
  for (;;) {
    try {
      await rmdir(dir);
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return true;
      if (code !== 'EBUSY' || Date.now() > deadline) throw err;
    }
    await sleep(TEARDOWN_RETRY_MS);
  }
}

/** Removes the shared parent directory (e.g. .../agentfense) if no other sandbox uses it any more. */
export async function removeParentIfEmpty(dir: string, logger: RuntimeLogger): Promise<void> {
  try {
    await rmdir(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Another sandbox still has a cgroup there (or removed it first): expected, not a failure.
    if (code === 'ENOTEMPTY' || code === 'EBUSY' || code === 'ENOENT' || code === 'EEXIST') {
      logger.debug({ dir, code }, 'cgroup parent still in use; left in place');
      return;
    }
    throw err;
  }
}

/** Attempts at creating a sandbox cgroup while another sandbox's stop() may remove the shared parent. */
const MKDIR_ATTEMPTS = 10;

/**
 * Runs `make` (the creation of a sandbox's cgroup under the shared parent) again when it fails with
 * ENOENT: a concurrent stop() of the last other sandbox removes the empty parent (removeParentIfEmpty) at
 * any moment between its creation and the sandbox directory's. Node's recursive mkdir fails that way too:
 * it meets EEXIST for a parent another start is making, stats it, and gets ENOENT when a stop removed it
 * in between (a run helper's spare failed to start so while the previous run's sandbox was retired).
 */
export async function whileParentVanishes<T>(make: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await make();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= MKDIR_ATTEMPTS) throw err;
    }
  }
}

/**
 * Creates a sandbox's cgroup directory (and the shared parent). Resolves 'existed' for a directory left
 * behind by a crashed control plane.
 */
export function makeCgroupDir(dir: string): Promise<'created' | 'existed'> {
  return whileParentVanishes(async () => {
    await mkdir(posix.dirname(dir), { recursive: true });
    return mkdirOnce(dir);
  });
}

/** Creates a sandbox's cgroup directory; 'existed' when a crashed control plane left it behind. */
export async function mkdirOnce(dir: string): Promise<'created' | 'existed'> {
  try {
    await mkdir(dir);
    return 'created';
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return 'existed';
    throw err;
  }
}
