// Attack: grow the FUSE worker (a root process outside the sandbox's cgroups) without bound. Under
// `--memory 256M --disk 50M`, 1,200 nested directories of 255-character names took the worker to 876 MiB
// RSS (1.3 GB at 1,500 levels): it kept a path string per level in maps keyed by paths (the delta's
// metadata, the rules' memo, the directory-fd cache), ~184 MB each. Defences: the worker keeps one name
// per level (delta/meta-state.ts) and bounds its path-keyed caches by characters; and every worker runs
// in a memory cgroup of its own with a bound derived from its sandbox's limit (control
// sandboxes/worker-cgroup.ts: 256 MiB + half the sandbox's memory), past which the kernel kills it, the
// sandbox's supervision says why, and repeated kills put the sandbox in ERROR with that reason.
import { readFile, truncate, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane, WORKER_CGROUP_PARENT, workerMemoryBound } from '@agentfense/control';
import { detectCgroupHost } from '@agentfense/protocol';
import { closePlane, makeDirs, waitFor } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

const MiB = 1024 * 1024;

/** The memory hierarchy the worker cgroups live in, or why there is none. */
const host = await detectCgroupHost();
const memory =
  host.v2?.controllers.has('memory') === true
    ? { root: host.v2.path, limitFile: 'memory.max' }
    : host.v1.has('memory')
      ? { root: host.v1.get('memory') as string, limitFile: 'memory.limit_in_bytes' }
      : null;

/** The worker cgroup's directory for a sandbox. */
const cgroupDir = (id: string): string =>
  posix.join(memory?.root ?? '/nonexistent', WORKER_CGROUP_PARENT, id);

/** VmRSS of a process in bytes; 0 once it is gone. */
async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${String(pid)}/status`, 'utf8').catch(() => '');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
}

describe.skipIf(memory === null)(
  `the worker's memory is bounded and charged${memory === null ? ' (skipped: no cgroup memory controller on this host)' : ''}`,
  () => {
    let dirs: TestDirs;
    let cp: ControlPlane;
    let codebaseId: string;

    beforeAll(async () => {
      dirs = await makeDirs();
      // A sparse 192 MiB file: reading it whole makes a worker hold 192 MiB at once.
      const big = posix.join(dirs.repo, 'src/big.bin');
      await writeFile(big, '');
      await truncate(big, 192 * MiB);
      cp = await ControlPlane.open({ dataDir: dirs.dataDir });
      codebaseId = (await cp.linkCodebase({ path: dirs.repo })).id;
    });
    afterAll(async () => {
      await closePlane(cp, dirs);
    }, 60_000);

    it('1,200 nested 255-character directories: the worker stays under its bound, in a cgroup with it', async () => {
      const memoryBytes = 256 * MiB;
      const { id } = await cp.createSandbox({
        codebaseId,
        // Disk enough for the tree's metadata (its journal records whole paths, ~184 MB), which the quota
        // counts: the memory bound is what is tested here.
        resources: { memoryBytes, diskBytes: 1024 * MiB },
      });
      await cp.startSandbox(id);
      const bound = workerMemoryBound(memoryBytes);
      expect(bound).toBe(384 * MiB);
      const worker = cp.workerPid(id) as number;
      const dir = cgroupDir(id);
      expect(Number(await readFile(posix.join(dir, memory?.limitFile ?? ''), 'utf8'))).toBe(bound);
      expect((await readFile(posix.join(dir, 'cgroup.procs'), 'utf8')).split('\n')).toContain(String(worker));

      let peak = 0;
      const sampler = setInterval(() => {
        void rssOf(worker).then((rss) => (peak = Math.max(peak, rss)));
      }, 100);
      const name = 'd'.repeat(255);
      const made = await cp
        .run(
          id,
          [
            'python3',
            '-c',
            // Relative mkdir + chdir: a path this long exists only one step at a time.
            `import os\nos.chdir('/workspace/output')\nfor _ in range(1200):\n    os.mkdir('${name}'); os.chdir('${name}')\nprint('made')`,
          ],
          { timeoutMs: 540_000 },
        )
        .finally(() => clearInterval(sampler));
      expect(made.stderr + made.stdout).toBe('made\n');
      // The same worker throughout (never killed by its bound), and well under it.
      expect(cp.workerPid(id)).toBe(worker);
      expect((await cp.getSandbox(id)).restartCount).toBe(0);
      expect(peak).toBeGreaterThan(0);
      expect(peak).toBeLessThan(bound);
      await cp.destroySandbox(id);
      await expect(readFile(posix.join(dir, 'cgroup.procs'), 'utf8')).rejects.toMatchObject({
        code: 'ENOENT',
      });
    }, 600_000);

    it('a worker over its bound is killed and replaced, and repeated kills put the sandbox in ERROR saying why', async () => {
      // A bound of 96 MiB whatever the sandbox's memory: reading the 192 MiB file whole goes past it.
      const tight = await ControlPlane.open({
        dataDir: posix.join(dirs.root, 'data-tight'),
        workerMemory: { baseBytes: 96 * MiB, share: 0 },
        supervision: { maxFailures: 3, failureWindowMs: 300_000 },
      });
      try {
        const linked = (await tight.linkCodebase({ path: dirs.repo })).id;
        const { id } = await tight.createSandbox({ codebaseId: linked });
        await tight.startSandbox(id);
        const first = tight.workerPid(id);
        // The call that took the worker over says so (not that a connection closed), as does the restart.
        const overBound = /went over its memory bound of 96 MiB and the kernel killed it/;
        await expect(tight.readFile(id, '/src/big.bin')).rejects.toThrow(overBound);
        const restarted = await waitFor('the worker restarted', async () => {
          const info = await tight.getSandbox(id);
          return info.restartCount >= 1 ? info : undefined;
        });
        expect(restarted.lastRestartReason).toMatch(overBound);
        // Commands still run on the new worker.
        expect((await tight.run(id, 'cat /workspace/src/app.py')).stdout).toBe('print("hello")\n');
        expect(tight.workerPid(id)).not.toBe(first);
        // Twice more: supervision gives up, with the reason, and a command says so instead of hanging.
        for (let n = 0; n < 2; n++)
          await expect(tight.readFile(id, '/src/big.bin')).rejects.toThrow(overBound);
        const failed = await waitFor(
          'the sandbox in ERROR',
          async () => {
            const info = await tight.getSandbox(id);
            return info.state === 'ERROR' ? info : undefined;
          },
          60_000,
        );
        expect(failed.stateReason).toMatch(/memory bound of 96 MiB/);
        await expect(tight.run(id, 'true', { timeoutMs: 10_000 })).rejects.toThrow(
          /ERROR|not running|memory bound/,
        );
        // The control plane carries on: another sandbox starts and runs.
        const other = await tight.createSandbox({ codebaseId: linked });
        await tight.startSandbox(other.id);
        expect((await tight.run(other.id, 'echo ok')).stdout).toBe('ok\n');
        await tight.destroySandbox(other.id);
        await tight.destroySandbox(id);
      } finally {
        await tight.close();
      }
    }, 300_000);
  },
);
