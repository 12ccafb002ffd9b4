// Control-plane restarts (contract §6): a crashed owner's sandboxes are recovered by the next process that
// opens the data directory (no stale mount, leftover worker killed, delta intact), while sandboxes of a
// live process sharing the data directory are never touched.
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import type { ResultPromise } from 'execa';
import { ControlPlane } from '@agentfense/control';
import { WrongStateError } from '@agentfense/protocol';
import {
  assertCleanAndRemove,
  makeDirs,
  mountsUnder,
  pidExists,
  waitFor,
} from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

interface Started {
  readonly child: ResultPromise;
  readonly sandboxId: string;
  readonly workerPid: number;
  readonly pid: number;
}

const CHILD = new URL('./owner-child.ts', import.meta.url).pathname;

/** Runs owner-child.ts under tsx (workspace packages from source) and waits for its report. */
async function startOwner(dirs: TestDirs): Promise<Started> {
  const child = execa(
    process.execPath,
    ['--import', 'tsx', '--conditions', '@agentfense/source', CHILD, dirs.dataDir, dirs.repo],
    { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe', reject: false, buffer: { stdout: false } },
  );
  const lines = createInterface({ input: child.stdout });
  const first = await Promise.race([
    new Promise<string>((resolve) => lines.once('line', resolve)),
    child.then((r) => {
      throw new Error(`owner child exited early: ${String(r.stderr)}`);
    }),
  ]);
  lines.close();
  return { child, ...(JSON.parse(first) as Omit<Started, 'child'>) };
}

describe('control-plane restart', () => {
  let dirs: TestDirs;
  const children: ResultPromise[] = [];

  beforeAll(async () => {
    dirs = await makeDirs();
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    const cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    for (const sb of (await cp.listSandboxes()).items) await cp.destroySandbox(sb.id);
    await cp.close();
    await assertCleanAndRemove(dirs);
  });

  it('recovers the sandboxes of a SIGKILLed owner: no stale mount, no worker, delta intact', async () => {
    const owner = await startOwner(dirs);
    children.push(owner.child);
    expect(await mountsUnder(dirs.dataDir)).not.toEqual([]);
    // Make the worker hang too, so only recovery can clear its mount (a live worker unmounts by itself
    // when its control connection closes).
    process.kill(owner.workerPid, 'SIGSTOP');
    owner.child.kill('SIGKILL');
    await owner.child;

    // Two processes' worth of control planes open at once: exactly one recovers the sandbox.
    const [cp, other] = await Promise.all([
      ControlPlane.open({ dataDir: dirs.dataDir }),
      ControlPlane.open({ dataDir: dirs.dataDir }),
    ]);
    await other.close();
    try {
      const info = await cp.getSandbox(owner.sandboxId);
      expect(info.state).toBe('STOPPED');
      expect(info.stateReason).toMatch(new RegExp(`recovered: control-plane process ${owner.pid} exited`));
      expect(info.ownerPid).toBeNull();
      expect(await mountsUnder(dirs.dataDir)).toEqual([]);
      await waitFor(
        'the leftover worker to die',
        () => (pidExists(owner.workerPid) ? undefined : true),
        5000,
      );
      // The delta survived: visible offline, then again in the restarted sandbox.
      expect((await cp.changes(owner.sandboxId)).map((c) => c.path)).toContain('/output/kept.txt');
      expect(await mountsUnder(dirs.dataDir)).toEqual([]);
      await cp.startSandbox(owner.sandboxId);
      const r = await cp.run(owner.sandboxId, 'cat /workspace/output/kept.txt');
      expect(r.stdout).toBe('kept\n');
      await cp.destroySandbox(owner.sandboxId);
    } finally {
      await cp.close();
    }
    expect(await mountsUnder(dirs.dataDir)).toEqual([]);
  });

  it('never touches sandboxes of another live process sharing the data directory', async () => {
    const owner = await startOwner(dirs);
    children.push(owner.child);
    const cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    try {
      const info = await cp.getSandbox(owner.sandboxId);
      expect(info.state).toBe('RUNNING');
      expect(info.ownerPid).toBe(owner.pid);
      expect(await mountsUnder(cp.layout.sandbox(owner.sandboxId).dir)).not.toEqual([]);
      await expect(cp.destroySandbox(owner.sandboxId)).rejects.toBeInstanceOf(WrongStateError);
      await expect(cp.run(owner.sandboxId, 'true')).rejects.toThrow(/running in control-plane process/);
      await expect(cp.startSandbox(owner.sandboxId)).rejects.toBeInstanceOf(WrongStateError);
      // The owner closes normally: it stops its sandbox and unmounts everything.
      owner.child.stdin?.write('close\n');
      const done = await owner.child;
      expect(done.exitCode).toBe(0);
      const after = await cp.getSandbox(owner.sandboxId);
      expect(after.state).toBe('STOPPED');
      expect(after.ownerPid).toBeNull();
      expect(await mountsUnder(dirs.dataDir)).toEqual([]);
      await cp.destroySandbox(owner.sandboxId);
    } finally {
      await cp.close();
    }
  });
});
