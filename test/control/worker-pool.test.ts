// The pool of workers spawned ahead of time: a pooled worker takes on its sandbox's log file and name at
// mount, the pool refills after a start, and close() leaves no idle worker running.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { assertCleanAndRemove, makeDirs, pidExists, waitFor } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('worker pool', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;

  beforeAll(async () => {
    dirs = await makeDirs();
    cp = await ControlPlane.open({ dataDir: dirs.dataDir, reapIntervalMs: 0 });
  });
  afterAll(async () => {
    await cp.close();
    await assertCleanAndRemove(dirs);
  });

  it('serves sandboxes from pooled workers, which log to their sandbox and die with close()', async () => {
    const { id: codebaseId } = await cp.linkCodebase({ path: dirs.repo });
    const first = await cp.createSandbox({ codebaseId, preset: 'agent-safe' });
    await cp.startSandbox(first.id);
    // The first start spawned on demand; a refill follows in the background.
    const [pooled] = await waitFor(
      'a pooled worker',
      () => {
        const pids = cp.idleWorkerPids;
        return pids.length > 0 ? pids : undefined;
      },
      30_000,
    );
    const second = await cp.createSandbox({ codebaseId, preset: 'agent-safe' });
    await cp.startSandbox(second.id);
    expect(cp.workerPid(second.id)).toBe(pooled);
    const result = await cp.run(second.id, 'cat /workspace/README.md; test ! -e /workspace/.env');
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe('# demo\n');
    // Its mount and everything after went to the sandbox's own log, under its name.
    const log = await readFile(join(dirs.dataDir, 'sandboxes', second.id, 'worker.log'), 'utf8');
    const mounted = log
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { msg: string; sandbox: string; pid: number })
      .find((entry) => entry.msg === 'mounted');
    expect(mounted).toMatchObject({ sandbox: second.id, pid: pooled });
    const idle = await waitFor(
      'the pool to refill',
      () => {
        const pids = cp.idleWorkerPids;
        return pids.length > 0 ? pids : undefined;
      },
      30_000,
    );
    await cp.close();
    for (const pid of idle)
      await waitFor(`pooled worker ${pid} to exit`, () => (pidExists(pid) ? undefined : true));
  });

  it('keeps no idle worker with workerPoolSize 0: every start spawns its own', async () => {
    for (const bad of [-1, 1.5, 17]) {
      await expect(ControlPlane.open({ dataDir: dirs.dataDir, workerPoolSize: bad })).rejects.toThrow(
        /workerPoolSize must be an integer from 0 to 16/,
      );
    }
    const plane = await ControlPlane.open({ dataDir: dirs.dataDir, reapIntervalMs: 0, workerPoolSize: 0 });
    try {
      const { id: codebaseId } = await plane.linkCodebase({ path: dirs.repo });
      const a = await plane.createSandbox({ codebaseId, preset: 'agent-safe' });
      await plane.startSandbox(a.id);
      expect((await plane.run(a.id, 'cat /workspace/README.md')).stdout).toBe('# demo\n');
      const b = await plane.createSandbox({ codebaseId, preset: 'agent-safe' });
      await plane.startSandbox(b.id);
      // Given time to refill, the default pool would have one by now (see above); this one stays empty.
      await new Promise((r) => setTimeout(r, 1500));
      expect(plane.idleWorkerPids).toEqual([]);
      expect(plane.workerPid(b.id)).not.toBe(plane.workerPid(a.id));
    } finally {
      await plane.close();
    }
  });
});
