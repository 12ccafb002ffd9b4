// The bwrap runtime's per-sandbox launcher across a kill -9 of the sandbox's worker: the launcher carries on
// (same af-init, same /tmp), the host's unmount of the dead mount and the new worker's mount propagate into
// it through its anchor, and the very first exec after the restart sees the workspace, delta included.
// The launcher starts while the worker is still mounting; a launch during which the mount arrived used to
// bind the FUSE mount instead of the anchor's bare directory and kept the dead mount after the next
// restart (ENOTCONN, "Transport endpoint is not connected"; 2 sandboxes of 12 in a reproduction, and CI).
// Twelve sandboxes make that start race likely to show if the defence (launcher.ts #start) is gone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from '@agentfense/control';
import { closePlane, openPlaneOverExample, waitFor } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('bwrap launcher across a worker restart', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;
  const before = process.env.AGENTFENSE_BWRAP_LAUNCHER;

  beforeAll(async () => {
    process.env.AGENTFENSE_BWRAP_LAUNCHER = '1';
    ({ dirs, cp, codebaseId } = await openPlaneOverExample());
  });
  afterAll(async () => {
    await closePlane(cp, dirs);
    if (before === undefined) delete process.env.AGENTFENSE_BWRAP_LAUNCHER;
    else process.env.AGENTFENSE_BWRAP_LAUNCHER = before;
  });

  it('execs keep working and see the files after the worker is killed twice', async () => {
    const pid1 = async (id: string): Promise<string> =>
      (await cp.run(id, 'cut -d" " -f22 /proc/1/stat; tr "\\0" " " < /proc/1/cmdline')).stdout;
    // One sandbox at a time, as in the reproduction: each gets a pooled worker, whose mount is quick enough
    // to land while its launcher is starting.
    for (let round = 0; round < 12; round++) {
      const { id } = await cp.createSandbox({ codebaseId, preset: 'development' });
      await cp.startSandbox(id);
      const launcher = await pid1(id);
      expect(launcher).toMatch(/^\d+\n\/\.agentfense\/af-init --fd 7 $/);
      const mark = await cp.run(id, 'echo before > /workspace/src/mine.txt && echo kept > /tmp/t');
      expect(mark.exitCode).toBe(0);
      for (const restarts of [1, 2]) {
        process.kill(cp.workerPid(id) as number, 'SIGKILL');
        await waitFor('the worker restart', async () =>
          (await cp.getSandbox(id)).restartCount === restarts ? true : undefined,
        );
        const r = await cp.run(
          id,
          `cat /workspace/src/app.py /workspace/src/mine.txt && echo ${restarts} > /workspace/src/n.txt`,
        );
        expect(r.stderr, `sandbox ${String(round)}, restart ${String(restarts)}`).toBe('');
        expect(r.stdout).toBe('print("hello")\nbefore\n');
        // The same launcher (pid 1's start time and command), with its /tmp.
        expect(await pid1(id)).toBe(launcher);
        expect((await cp.run(id, 'cat /tmp/t')).stdout).toBe('kept\n');
      }
      expect((await cp.run(id, 'cat /workspace/src/n.txt')).stdout).toBe('2\n');
      await cp.destroySandbox(id);
    }
  });
});
