// A bwrap session survives a kill -9 of its sandbox's worker, keeping its shell state.
// The session's shell binds /workspace over an anchor (runtime-bwrap relay.ts): the dead mount's copy is
// removed by propagation and the new worker's mount appears under the running shell; after the restart
// the shell re-enters its cwd, which was a directory of the dead mount. Without the anchor the session
// sees ENOTCONN (or an empty directory) forever; without the re-entry, every relative path fails.
import { readdir } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from '@agentfense/control';
import { DEFAULT_RUN_DIR } from '@agentfense/runtime-bwrap';
import { closePlane, mountsUnder, openPlaneOverExample, waitFor } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('a bwrap session across a worker restart', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    ({ dirs, cp, codebaseId } = await openPlaneOverExample());
  });
  afterAll(async () => {
    await closePlane(cp, dirs);
  });

  async function killWorker(id: string, restarts: number): Promise<void> {
    process.kill(cp.sandboxes.workerPid(id) as number, 'SIGKILL');
    await waitFor('the worker restart', async () =>
      (await cp.getSandbox(id)).restartCount === restarts ? true : undefined,
    );
  }

  it('keeps cwd, exports, variables and functions, and sees the files (delta included)', async () => {
    const { id } = await cp.createSandbox({ codebaseId, preset: 'development' });
    await cp.startSandbox(id);
    const session = await cp.createSession(id, { shell: '/bin/bash' });
    const setup = await session.run(
      'cd /workspace/src && export AF_EXPORTED=exported && AF_LOCAL=local && greet() { echo "hi $1"; } && cd /workspace/docs && cd /workspace/src && echo before > mine.txt',
    );
    expect(setup.exitCode).toBe(0);
    await killWorker(id, 1);
    expect(session.status).toBe('open');
    const r = await session.run(
      'pwd; echo "$AF_EXPORTED $AF_LOCAL $OLDPWD"; greet you; cat app.py mine.txt; ls /workspace | head -3; echo after > new.txt',
    );
    expect(r.stderr).toBe('');
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe(
      '/workspace/src\nexported local /workspace/docs\nhi you\nprint("hello")\nbefore\nREADME.md\nconfig\ndocs\n',
    );
    // The write went through the new worker into the delta (a fresh exec, its own bwrap, sees it).
    expect((await cp.run(id, 'cat /workspace/src/new.txt')).stdout).toBe('after\n');
    // The anchor (the bare directory under the mount) shows no path of the data directory (row 9).
    const mountinfo = (await session.run('cat /proc/self/mountinfo')).stdout;
    expect(mountinfo).toMatch(/ \/workspace \/workspace /);
    expect(mountinfo).not.toContain(dirs.root);
    // A second restart: the anchor follows again.
    await killWorker(id, 2);
    const again = await session.run('pwd; cat new.txt');
    expect(again.stdout.toString()).toBe('/workspace/src\nafter\n');
    await session.close();
    // The session's anchor is gone with it; destroying leaves no mount and nothing in the run directory.
    await cp.destroySandbox(id);
    expect(await mountsUnder(dirs.dataDir)).toEqual([]);
    expect(await mountsUnder(DEFAULT_RUN_DIR).then((m) => m.filter((p) => p.includes(id)))).toEqual([]);
    expect((await readdir(DEFAULT_RUN_DIR)).filter((e) => e.startsWith(id))).toEqual([]);
  });

  it('the rules still hold in the session after the restart, and a hidden path stays hidden', async () => {
    const { id } = await cp.createSandbox({ codebaseId, preset: 'agent-safe' });
    await cp.startSandbox(id);
    const session = await cp.createSession(id);
    expect((await session.run('cd /workspace && ls secrets')).exitCode).not.toBe(0);
    await killWorker(id, 1);
    const r = await session.run('cat .env secrets/private.key; ls; echo x > README.md');
    expect(r.stdout).not.toContain('hunter2');
    expect(r.stdout).not.toContain('PRIVATE-KEY');
    expect(r.stdout).toContain('README.md');
    expect(r.stderr).toMatch(/No such file or directory[\s\S]*(Permission denied|Read-only)/);
    await session.close();
    await cp.destroySandbox(id);
  });

  it('a session opened after a restart also follows the next one', async () => {
    const { id } = await cp.createSandbox({ codebaseId });
    await cp.startSandbox(id);
    await killWorker(id, 1);
    const session = await cp.createSession(id);
    expect((await session.run('cd /workspace/src && X=1')).exitCode).toBe(0);
    await killWorker(id, 2);
    const r = await session.run('echo $X; cat app.py');
    expect(r.stdout).toBe('1\nprint("hello")\n');
    await session.close();
    await cp.destroySandbox(id);
  });

  it('a session opened as the worker dies starts on the new worker and follows the next restart', async () => {
    // Without waiting for the restart, the shell's bwrap met the dead mount ("Can't chdir to /workspace")
    // and createSession failed with an internal error, every time at a few ms after the kill.
    // Three kills within a minute put a sandbox in ERROR: one sandbox per delay, two kills each.
    for (const delayMs of [0, 5, 20]) {
      const { id } = await cp.createSandbox({ codebaseId });
      await cp.startSandbox(id);
      process.kill(cp.sandboxes.workerPid(id) as number, 'SIGKILL');
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      const session = await cp.createSession(id);
      await waitFor('the worker restart', async () =>
        (await cp.getSandbox(id)).restartCount === 1 ? true : undefined,
      );
      expect((await session.run('cat /workspace/README.md')).stdout).toBe('# demo\n');
      await killWorker(id, 2);
      const after = await session.run('cat /workspace/README.md');
      expect(after.stderr, `opened ${String(delayMs)} ms after the kill`).toBe('');
      expect(after.stdout).toBe('# demo\n');
      await session.close();
      await cp.destroySandbox(id);
    }
  });
});
