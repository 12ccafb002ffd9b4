// Frozen layers are charged to the disk quota of the sandbox that made them: an agent checkpointing in a
// loop runs out of room in its own writes, deleting a checkpoint nothing else stands on gives the room
// back, a fork's own writes are charged to it while the layers it inherited stay charged to its parent
// alone, the charge survives a worker restart and a control-plane restart, and a layer is charged exactly
// what it holds on the host.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { layerBytes } from '@agentfense/fuse-worker';
import { closePlane, openPlaneOverExample, waitFor } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';
import { openRecordsDb } from '../helpers/records-db.js';

const MiB = 1024 * 1024;
const QUOTA = 4 * MiB;

describe('checkpoints and the disk quota', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    ({ dirs, cp, codebaseId } = await openPlaneOverExample());
  });
  afterAll(() => closePlane(cp, dirs));

  async function running(): Promise<string> {
    const { id } = await cp.createSandbox({
      codebaseId,
      preset: 'full-access',
      resources: { diskBytes: QUOTA },
    });
    await cp.startSandbox(id);
    return id;
  }
  /** Writes `mib` MiB to /workspace/output/<name>; true if the sandbox's write succeeded. */
  const write = async (id: string, name: string, mib: number): Promise<boolean> => {
    const result = await cp.run(
      id,
      `head -c ${mib * MiB} /dev/zero | tr '\\0' x > /workspace/output/${name}`,
    );
    if (result.exitCode !== 0) expect(result.stderr).toMatch(/No space left|quota/i);
    return result.exitCode === 0;
  };

  it('a checkpoint loop under a small quota runs out of room in its own writes', async () => {
    const id = await running();
    let written = 0;
    for (let i = 0; i < 12; i++) {
      if (!(await write(id, `f${i}`, 1))) break;
      written++;
      await cp.checkpoint(id);
    }
    // Each writable layer only ever held 1 MiB: only the frozen layers' charge can stop the loop.
    expect(written).toBeGreaterThanOrEqual(2);
    expect(written).toBeLessThan(QUOTA / MiB);
    await cp.destroySandbox(id);
  });

  it('deleting a checkpoint whose layers nothing else holds gives its bytes back', async () => {
    const id = await running();
    const empty = await cp.checkpoint(id, { name: 'empty' });
    expect(await write(id, 'big', 3)).toBe(true);
    const full = await cp.checkpoint(id, { name: 'full' });
    await cp.restoreCheckpoint(id, empty.id);
    // The 3 MiB layer is still kept by its checkpoint: no room for another 3 MiB.
    expect(await write(id, 'again', 3)).toBe(false);
    await cp.deleteCheckpoint(id, full.id);
    await cp.run(id, 'rm -f /workspace/output/again');
    expect(await write(id, 'again', 3)).toBe(true);
    await cp.destroySandbox(id);
  });

  it("charges a fork's writes to the fork and the layers it inherited to its parent only", async () => {
    const parent = await running();
    expect(await write(parent, 'parent', 3)).toBe(true);
    const [fork] = await cp.forkSandbox(parent, { resources: { diskBytes: QUOTA } });
    const forkId = fork?.id as string;
    // The fork stands on the parent's 3 MiB layer without paying for it.
    expect(await write(forkId, 'fork', 3)).toBe(true);
    // The parent does pay for it (the fork's checkpoint), besides its own writable layer.
    expect(await write(parent, 'more', 2)).toBe(false);
    // The fork's own checkpoint is charged to the fork: its 3 MiB count, now frozen.
    await cp.checkpoint(forkId);
    expect(await write(forkId, 'fork2', 2)).toBe(false);
    await cp.destroySandbox(forkId);
    await cp.destroySandbox(parent);
  });

  it('charges each frozen layer exactly what a walk of it measures, codebase files copied up', async () => {
    const id = await running();
    // Codebase files copied up (an append keeps their content) into copied-up directories, a new
    // directory, a removal (a whiteout), then a second layer over the first.
    await cp.run(
      id,
      'cd /workspace && echo more >> src/app.py && echo more >> README.md && mkdir output/d && ' +
        'echo x > output/d/f && rm docs/guide.md',
    );
    await cp.checkpoint(id);
    await cp.run(id, 'cd /workspace && echo again >> src/util.py');
    await cp.checkpoint(id);
    const db = openRecordsDb(dirs.dataDir);
    const rows = db.prepare('SELECT id, bytes FROM layers WHERE maker_id = ?').all(id) as {
      id: string;
      bytes: number | null;
    }[];
    db.close();
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expect(row.bytes, row.id).toBe(await layerBytes(join(dirs.dataDir, 'layers', row.id)));
    }
    await cp.destroySandbox(id);
  });

  it('keeps the charge when its worker is killed and replaced', async () => {
    const id = await running();
    await cp.checkpoint(id); // the charge of an empty layer: the worker's total is then set once
    expect(await write(id, 'big', 3)).toBe(true);
    await cp.checkpoint(id); // set again, 3 MiB more: what the next worker must start with
    const pid = cp.workerPid(id) as number;
    process.kill(pid, 'SIGKILL');
    await waitFor('the worker to be replaced', async () => {
      const now = cp.workerPid(id);
      return now !== undefined && now !== pid && (await cp.getSandbox(id)).restartCount > 0
        ? true
        : undefined;
    });
    expect(await write(id, 'again', 2)).toBe(false);
    await cp.destroySandbox(id);
  });

  it('keeps the charge across a restart of the control plane', async () => {
    const id = await running();
    expect(await write(id, 'big', 3)).toBe(true);
    await cp.checkpoint(id);
    await cp.stopSandbox(id);
    await cp.close();
    cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    await cp.startSandbox(id);
    expect(await write(id, 'again', 2)).toBe(false);
    await cp.destroySandbox(id);
  });
});
