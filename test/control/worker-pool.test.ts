// The pool of workers spawned ahead of time: a pooled worker takes on its sandbox's log file and name at
// mount, the pool refills after a start, and close() leaves no idle worker running.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { assertCleanAndRemove, makeDirs, pidExists, waitFor } from './fixtures.js';
import type { TestDirs } from './fixtures.js';

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
        const pids = cp.sandboxes.idleWorkerPids;
        return pids.length > 0 ? pids : undefined;
      },
      30_000,
    );
    const second = await cp.createSandbox({ codebaseId, preset: 'agent-safe' });
    await cp.startSandbox(second.id);
    expect(cp.sandboxes.workerPid(second.id)).toBe(pooled);
    const result = await cp.exec(second.id, 'cat /workspace/README.md; test ! -e /workspace/.env');
    expect(result.exitCode).toBe(0);
    expect(result.stdout.toString()).toBe('# demo\n');
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
        const pids = cp.sandboxes.idleWorkerPids;
        return pids.length > 0 ? pids : undefined;
      },
      30_000,
    );
    await cp.close();
    for (const pid of idle)
      await waitFor(`pooled worker ${pid} to exit`, () => (pidExists(pid) ? undefined : true));
  });
});
