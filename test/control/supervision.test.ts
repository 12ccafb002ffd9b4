// Worker supervision (contract §6) with real workers: kill -9 and SIGSTOP of a sandbox's worker are noticed
// within seconds, the dead mount is cleared and a new worker mounted under the still-running sandbox;
// repeated failures put the sandbox in ERROR; other sandboxes carry on throughout.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { WrongStateError } from '@agentfense/protocol';
import { createBwrapRuntime } from '@agentfense/runtime-bwrap';
import {
  closePlane,
  mountsUnder,
  openPlaneOverExample,
  pidExists,
  waitFor,
} from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('worker supervision', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;
  const stopped: number[] = [];

  beforeAll(async () => {
    ({ dirs, cp, codebaseId } = await openPlaneOverExample());
  });
  afterAll(async () => {
    // A test that failed half-way must not leave a SIGSTOPped worker behind.
    for (const pid of stopped) if (pidExists(pid)) process.kill(pid, 'SIGKILL');
    await closePlane(cp, dirs);
  });

  async function running(): Promise<string> {
    const { id } = await cp.createSandbox({ codebaseId });
    await cp.startSandbox(id);
    return id;
  }

  it('replaces a worker killed with SIGKILL; the next exec sees /workspace again', async () => {
    const id = await running();
    const other = await running();
    await cp.run(id, 'echo before > /workspace/output/before.txt');
    // Rules changed at run time must survive the restart.
    await cp.setRules(id, {
      rules: [
        { pattern: '**', permission: 'read' },
        { pattern: '/output/**', permission: 'write' },
        { pattern: '/docs/', permission: 'none' },
      ],
    });
    const pid = cp.workerPid(id) as number;
    const killedAt = Date.now();
    process.kill(pid, 'SIGKILL');
    const info = await waitFor('the restart to be recorded', async () => {
      const sb = await cp.getSandbox(id);
      return sb.restartCount === 1 ? sb : undefined;
    });
    // Noticed at once; the bound leaves room for spawning a worker on a loaded host.
    expect(Date.now() - killedAt).toBeLessThan(10_000);
    expect(info.state).toBe('RUNNING');
    expect(info.lastRestartReason).toMatch(/exited.*SIGKILL/);
    expect(cp.workerPid(id)).not.toBe(pid);
    const r = await cp.run(id, 'cat /workspace/README.md /workspace/output/before.txt');
    expect(r.stderr.toString()).toBe('');
    expect(r.stdout).toBe('# demo\nbefore\n'); // the delta survived the crash
    expect((await cp.run(id, 'ls /workspace')).stdout).not.toContain('docs');
    // The other sandbox never noticed.
    expect((await cp.run(other, 'cat /workspace/README.md')).exitCode).toBe(0);
    expect((await cp.getSandbox(other)).restartCount).toBe(0);
    await cp.destroySandbox(id);
    await cp.destroySandbox(other);
    expect(await mountsUnder(dirs.dataDir)).toEqual([]);
  });

  it('closes the sessions of a runtime whose shells cannot follow a remount, with a reason that says so', async () => {
    // bwrap's and docker's sessions survive a restart (test/sessions/worker-restart.test.ts); a runtime
    // without that trait (an embedder's) gets its sessions closed instead of failing with ENOTCONN forever.
    const bwrap = createBwrapRuntime({ dataDir: dirs.dataDir });
    const plain = await ControlPlane.open({
      dataDir: dirs.dataDir,
      runtimes: { bwrap: { ...bwrap, traits: { ...bwrap.traits, sessionsSurviveWorkerRestart: false } } },
    });
    try {
      const { id } = await plain.createSandbox({ codebaseId });
      await plain.startSandbox(id);
      const session = await plain.createSession(id);
      expect((await session.run('cd /workspace && cat README.md')).stdout).toBe('# demo\n');
      process.kill(plain.workerPid(id) as number, 'SIGKILL');
      await waitFor('the session to close', () => (session.status === 'closed' ? true : undefined));
      expect(session.closedReason).toBe('worker-restarted');
      await expect(session.run('true')).rejects.toThrow(/closed \(worker-restarted\)/);
      const fresh = await plain.createSession(id);
      expect((await fresh.run('cat /workspace/README.md')).stdout).toBe('# demo\n');
      await fresh.close();
      await plain.destroySandbox(id);
    } finally {
      await plain.close();
    }
  });

  it('detects a hung (SIGSTOPped) worker within seconds and recovers', async () => {
    const id = await running();
    const other = await running();
    const pid = cp.workerPid(id) as number;
    stopped.push(pid);
    const stoppedAt = Date.now();
    process.kill(pid, 'SIGSTOP');
    // Meanwhile the other sandbox keeps working.
    expect((await cp.run(other, 'ls /workspace')).exitCode).toBe(0);
    const info = await waitFor('the hung worker to be replaced', async () => {
      const sb = await cp.getSandbox(id);
      return sb.restartCount === 1 ? sb : undefined;
    });
    // Two missed 2 s pings (~5 s), then a restart; the bound leaves room for a loaded host.
    expect(Date.now() - stoppedAt).toBeLessThan(15_000);
    expect(info.lastRestartReason).toMatch(/health/);
    await waitFor('the hung worker to be gone', () => (pidExists(pid) ? undefined : true), 5000);
    const r = await cp.run(id, 'cat /workspace/src/app.py');
    expect(r.stdout).toBe('print("hello")\n');
    expect((await cp.run(other, 'cat /workspace/README.md')).exitCode).toBe(0);
    await cp.destroySandbox(id);
    await cp.destroySandbox(other);
    expect(await mountsUnder(dirs.dataDir)).toEqual([]);
  });

  it('puts the sandbox in ERROR after repeated failures, leaving nothing mounted', async () => {
    const strict = await ControlPlane.open({
      dataDir: dirs.dataDir,
      supervision: { maxFailures: 2, failureWindowMs: 60_000 },
    });
    try {
      const { id } = await strict.createSandbox({ codebaseId });
      await strict.startSandbox(id);
      process.kill(strict.workerPid(id) as number, 'SIGKILL');
      await waitFor('the first restart', async () =>
        (await strict.getSandbox(id)).restartCount === 1 ? true : undefined,
      );
      process.kill(strict.workerPid(id) as number, 'SIGKILL');
      const info = await waitFor('ERROR', async () => {
        const sb = await strict.getSandbox(id);
        return sb.state === 'ERROR' ? sb : undefined;
      });
      expect(info.stateReason).toMatch(/2 worker failures/);
      await expect(strict.run(id, 'true')).rejects.toBeInstanceOf(WrongStateError);
      expect(await mountsUnder(strict.layout.sandbox(id).dir)).toEqual([]);
      // ERROR → RUNNING: starting again works, the delta is still there.
      await strict.startSandbox(id);
      expect((await strict.run(id, 'cat /workspace/README.md')).exitCode).toBe(0);
      await strict.destroySandbox(id);
    } finally {
      await strict.close();
    }
  });
});
