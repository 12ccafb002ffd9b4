// The three places the workloads run, opened fresh for each round: natively in a directory on the same
// disk as the codebase, in a fuse-overlayfs mount over the codebase, and in an AgentFense sandbox over it
// (full-access preset: every write goes to the sandbox's delta; bwrap runtime). A session's `sh(script)`
// resolves with { exitCode, stdout, stderr } and never throws for a failing command; `ops()` (agentfense
// only) is the worker's count of FUSE requests per op so far; `cpuMs()` (both mounts) the CPU its
// filesystem daemon has used so far; `p50Us()` (agentfense only) the worker's median time per op in its
// handler since the sandbox started. Every session is closed through `cleanup`,
// also when the run fails.
import { availableParallelism } from 'node:os';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { clearFuseMount, isFuseMounted } from '@agentfense/fuse-worker';
import { bash, findProcess, processCpuMs, run } from './host.js';
import { workloadEnv } from './workloads.js';

/** How long one workload command may take (an `npm ci` through a mount on a loaded 2-core machine). */
export const COMMAND_TIMEOUT_MS = 20 * 60_000;
/** Where the agentfense workloads write: the codebase root is the sandbox's /workspace. */
const SANDBOX_WORK = '/workspace/work';

/**
 * Native: the commands run as they are, writing into `dir`/work. npm writes into its cache as it reads
 * it (index entries), so native npm gets a copy of the fixture's cache, made untimed: the other targets
 * write into their layer above the fixture, and the fixture stays the same for every run.
 */
export async function openNative({ codebase, dir, cleanup }) {
  const work = join(dir, 'work');
  await mkdir(work, { recursive: true });
  const close = cleanup.add(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
  const npmCache = join(dir, 'npm-cache');
  await run(['cp', '-a', join(codebase, 'npm-cache'), npmCache]);
  const env = workloadEnv({ codebase, work, npmCache });
  return { sh: (script) => bash({ script, cwd: work, env, timeoutMs: COMMAND_TIMEOUT_MS }), close };
}

/** fuse-overlayfs over the codebase (upper and work directories in `dir`), commands run in the mount. */
export async function openOverlay({ codebase, dir, cleanup }) {
  const [upper, ovlWork, mnt] = ['upper', 'ovl-work', 'mnt'].map((name) => join(dir, name));
  for (const d of [upper, ovlWork, mnt]) await mkdir(d, { recursive: true });
  const close = cleanup.add(`unmount ${mnt}`, async () => {
    await unmountOverlay(mnt);
    await rm(dir, { recursive: true, force: true });
  });
  try {
    // It forks into the background once the mount is up; fusermount3 -u ends it.
    await run(['fuse-overlayfs', '-o', `lowerdir=${codebase},upperdir=${upper},workdir=${ovlWork}`, mnt]);
    const daemon = await findProcess(['fuse-overlayfs', mnt]);
    const work = join(mnt, 'work');
    await mkdir(work);
    const env = workloadEnv({ codebase: mnt, work });
    return {
      sh: (script) => bash({ script, cwd: work, env, timeoutMs: COMMAND_TIMEOUT_MS }),
      cpuMs: async () => (daemon === undefined ? undefined : processCpuMs(daemon)),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

async function unmountOverlay(mnt) {
  if (!(await isFuseMounted(mnt))) return;
  await run(['fusermount3', '-u', mnt]).catch(() => clearFuseMount(mnt));
  // The directory is removed only once nothing is mounted on it (rm -rf through the mount would reach
  // the codebase).
  if (await isFuseMounted(mnt)) throw new Error(`${mnt} is still mounted; left its directory in place`);
}

/**
 * An AgentFense sandbox over the linked codebase `codebaseId` of the control plane `cp`. The sandbox gets
 * every CPU (the default leaves one to the host) so that builds compete on equal terms with native.
 */
export async function openAgentfense({ cp, codebaseId, cleanup }) {
  const { id } = await cp.createSandbox({
    codebaseId,
    preset: 'full-access',
    runtime: 'bwrap',
    resources: { cpuQuota: availableParallelism() * 100_000 },
  });
  const close = cleanup.add(`destroy sandbox ${id}`, () => cp.destroySandbox(id));
  try {
    await cp.startSandbox(id);
    const env = workloadEnv({ codebase: '/workspace', work: SANDBOX_WORK });
    const made = await cp.run(id, ['mkdir', SANDBOX_WORK]);
    if (made.exitCode !== 0) throw new Error(`mkdir ${SANDBOX_WORK} in the sandbox: ${made.stderr}`);
    return {
      sh: (script) =>
        cp.run(id, ['bash', '-c', script], { env, cwd: SANDBOX_WORK, timeoutMs: COMMAND_TIMEOUT_MS }),
      ops: async () => {
        const counts = {};
        for (const [op, s] of Object.entries((await cp.workerStats(id)).ops)) counts[op] = s.count;
        return counts;
      },
      cpuMs: async () => (await cp.workerStats(id)).cpuMs,
      p50Us: async () => {
        const p50 = {};
        for (const [op, s] of Object.entries((await cp.workerStats(id)).ops)) p50[op] = s.p50Us;
        return p50;
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
