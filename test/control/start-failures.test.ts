// A start that fails reports why, leaves no worker, no mount and no shared bind behind, and puts the
// sandbox in ERROR (from which it can be started again). Also: runtimes plug in through the `runtimes` map.
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { UnavailableError } from '@agentfense/protocol';
import type { RuntimeStartOptions, SandboxRuntime } from '@agentfense/protocol';
import { createBwrapRuntime } from '@agentfense/runtime-bwrap';
import { closePlane, makeDirs, mountsUnder, pidExists, writeTree } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('start failures', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let broken = true;
  const started: RuntimeStartOptions[] = [];

  beforeAll(async () => {
    dirs = await makeDirs();
    const bwrap = createBwrapRuntime();
    // A runtime that fails until told otherwise, then delegates to bwrap.
    const flaky: SandboxRuntime = {
      name: 'bwrap',
      traits: bwrap.traits,
      clearLeftovers: (stateDir) => bwrap.clearLeftovers(stateDir),
      check: () => bwrap.check(),
      start: (options) => {
        started.push(options);
        if (broken) return Promise.reject(new UnavailableError('flaky runtime: engine missing (install it)'));
        return bwrap.start(options);
      },
    };
    cp = await ControlPlane.open({ dataDir: dirs.dataDir, runtimes: { flaky: () => flaky } });
  });
  afterAll(async () => {
    await closePlane(cp, dirs);
  });

  it('a failing runtime: clear error, ERROR state, nothing left; a later start works', async () => {
    const { id: codebaseId } = await cp.linkCodebase({ path: dirs.repo });
    const { id } = await cp.createSandbox({ codebaseId, runtime: 'flaky' });
    await expect(cp.startSandbox(id)).rejects.toThrow(/engine missing/);
    const info = await cp.getSandbox(id);
    expect(info.state).toBe('ERROR');
    expect(info.stateReason).toMatch(/start failed: flaky runtime: engine missing/);
    expect(info.ownerPid).toBeNull();
    expect(started.at(-1)?.workspaceHostPath).toBe(cp.layout.sandbox(id).workspace);
    expect(await mountsUnder(dirs.dataDir)).toEqual([]);
    broken = false;
    await cp.startSandbox(id);
    expect((await cp.run(id, 'cat /workspace/README.md')).stdout).toBe('# demo\n');
    const worker = cp.workerPid(id) as number;
    await cp.destroySandbox(id);
    expect(pidExists(worker)).toBe(false);
    await cp.deleteCodebase(codebaseId);
  });

  it('a linked directory that disappeared: the worker cannot mount, nothing is left behind', async () => {
    const gone = `${dirs.root}/gone`;
    await writeTree(gone, { 'a.txt': 'a' });
    const { id: codebaseId } = await cp.linkCodebase({ path: gone });
    const { id } = await cp.createSandbox({ codebaseId });
    await rm(gone, { recursive: true });
    await expect(cp.startSandbox(id)).rejects.toThrow(/directory of codebase .* does not exist any more/);
    expect((await cp.getSandbox(id)).state).toBe('ERROR');
    expect(await mountsUnder(dirs.dataDir)).toEqual([]);
    await cp.destroySandbox(id);
    await cp.deleteCodebase(codebaseId);
  });
});
