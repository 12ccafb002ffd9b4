// The checkpoint limits on a real control plane: a checkpoint past maxCheckpoints is refused naming the
// limit, a stack deeper than maxStackDepth is compacted in the background, and a wrong setting stops open().
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { closePlane, makeDirs, waitFor } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('checkpoint limits', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    dirs = await makeDirs();
    cp = await ControlPlane.open({
      dataDir: dirs.dataDir,
      checkpoints: { maxCheckpoints: 3, maxStackDepth: 4 },
    });
    codebaseId = (await cp.linkCodebase({ path: dirs.repo })).id;
  });
  afterAll(() => closePlane(cp, dirs));

  it('refuses a checkpoint past maxCheckpoints, naming the limit; a delete makes room', async () => {
    const { id } = await cp.createSandbox({ codebaseId, preset: 'full-access' });
    for (let i = 0; i < 3; i++) await cp.checkpoint(id);
    await expect(cp.checkpoint(id)).rejects.toThrow(
      /has 3 checkpoints, the most it may keep \(checkpoints\.maxCheckpoints \/ AGENTFENSE_MAX_CHECKPOINTS\): delete one first/,
    );
    await cp.deleteCheckpoint(id, (await cp.listCheckpoints(id))[0]?.id as string);
    await cp.checkpoint(id);
    await cp.destroySandbox(id);
  });

  it('compacts a stack deeper than maxStackDepth once its checkpoints no longer need each layer', async () => {
    const { id } = await cp.createSandbox({ codebaseId, preset: 'full-access' });
    // Deleting checkpoints keeps their layers under the sandbox, but frees the boundaries between them.
    for (let i = 0; i < 6; i++) {
      await cp.writeFile(id, `/step${i}`, `${i}`);
      const made = await cp.checkpoint(id);
      await cp.deleteCheckpoint(id, made.id);
    }
    const last = await cp.checkpoint(id); // taken at once, the stack folded after it
    expect(last.depth).toBeGreaterThan(4);
    await waitFor('the compaction', async () =>
      (await cp.listCheckpoints(id)).every((c) => c.depth <= 4) ? true : undefined,
    );
    for (let i = 0; i < 6; i++) expect(String(await cp.readFile(id, `/step${i}`))).toBe(`${i}`);
    await cp.destroySandbox(id);
  });

  it('refuses to open with a limit out of range, naming the setting', async () => {
    await expect(
      ControlPlane.open({ dataDir: dirs.dataDir, checkpoints: { maxStackDepth: 0 } }),
    ).rejects.toThrow(/checkpoints\.maxStackDepth must be an integer from 1 to 4096 \(got 0\)/);
  });
});
