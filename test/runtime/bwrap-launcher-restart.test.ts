// The bwrap runtime's per-sandbox launcher (AGENTFENSE_BWRAP_LAUNCHER=1) across a kill -9 of the sandbox's
// worker: the launcher's bwrap binds /workspace over an anchor (runtime-bwrap relay.ts, as a session's
// shell does), so the restarted worker's mount shows through under the running af-init and later execs
// see the workspace (delta included) without a new launcher. Without the anchor every exec after the
// restart fails with ENOTCONN ("Transport endpoint is not connected") or sees an empty directory.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { assertCleanAndRemove, makeDirs, waitFor } from '../control/fixtures.js';
import type { TestDirs } from '../control/fixtures.js';

describe('bwrap launcher across a worker restart', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;
  const before = process.env.AGENTFENSE_BWRAP_LAUNCHER;

  beforeAll(async () => {
    process.env.AGENTFENSE_BWRAP_LAUNCHER = '1';
    dirs = await makeDirs();
    cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    codebaseId = (await cp.linkCodebase({ path: dirs.repo })).id;
  });
  afterAll(async () => {
    for (const sb of cp?.listSandboxes().items ?? []) await cp.destroySandbox(sb.id);
    await cp?.close();
    await assertCleanAndRemove(dirs);
    if (before === undefined) delete process.env.AGENTFENSE_BWRAP_LAUNCHER;
    else process.env.AGENTFENSE_BWRAP_LAUNCHER = before;
  });

  it('execs keep working (same af-init, same /tmp) and see the files after the worker is killed twice', async () => {
    const { id } = await cp.createSandbox({ codebaseId, preset: 'development' });
    await cp.startSandbox(id);
    const pid1 = async (): Promise<string> =>
      (await cp.run(id, 'cut -d" " -f22 /proc/1/stat; tr "\\0" " " < /proc/1/cmdline')).stdout;
    const launcher = await pid1();
    expect(launcher).toMatch(/^\d+\n\/\.agentfense\/af-init --fd 7 $/);
    expect((await cp.run(id, 'echo before > /workspace/src/mine.txt && echo kept > /tmp/t')).exitCode).toBe(
      0,
    );
    for (const restarts of [1, 2]) {
      process.kill(cp.workerPid(id) as number, 'SIGKILL');
      await waitFor('the worker restart', () =>
        cp.getSandbox(id).restartCount === restarts ? true : undefined,
      );
      const r = await cp.run(
        id,
        `cat /workspace/src/app.py /workspace/src/mine.txt /tmp/t && echo ${restarts} > /workspace/src/n.txt`,
      );
      expect(r.stderr).toBe('');
      expect(r.stdout).toBe('print("hello")\nbefore\nkept\n');
      expect(await pid1()).toBe(launcher);
    }
    expect((await cp.run(id, 'cat /workspace/src/n.txt')).stdout).toBe('2\n');
  });
});
