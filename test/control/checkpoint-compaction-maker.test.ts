// Who pays for a merged layer: the sandbox that made the folded pair, also when a fork standing on the
// pair reports the merged layer before the compaction's records are written (a compaction cut short after
// switching the fork, the fork mounted before the compaction is finished).
import { describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { closePlane, makeDirs, waitFor } from '../helpers/control-fixtures.js';
import { openRecordsDb } from '../helpers/records-db.js';

/** Each recorded layer's maker. */
function makers(dataDir: string): Map<string, string> {
  const db = openRecordsDb(dataDir);
  try {
    const rows = db.prepare('SELECT id, maker_id FROM layers').all() as { id: string; maker_id: string }[];
    return new Map(rows.map((row) => [row.id, row.maker_id]));
  } finally {
    db.close();
  }
}

describe('a merged layer', () => {
  it('is charged to the maker of the pair even when a fork on it reports it first', async () => {
    const dirs = await makeDirs({ 'out/.keep': '' });
    const dying = { step: 'switched' as string | null };
    let died: () => void = () => undefined;
    const dead = new Promise<void>((resolve) => {
      died = resolve;
    });
    const open = (): Promise<ControlPlane> =>
      ControlPlane.open({
        dataDir: dirs.dataDir,
        checkpoints: { maxStackDepth: 2 },
        compactionFault: (at) => {
          if (at !== dying.step) return;
          died();
          throw new Error(`died at ${at}`);
        },
      });
    let cp: ControlPlane | undefined = await open();
    try {
      const codebaseId = (await cp.linkCodebase({ path: dirs.repo })).id;
      const { id } = await cp.createSandbox({ codebaseId, preset: 'full-access' });
      await cp.writeFile(id, '/out/a', 'a');
      await cp.checkpoint(id);
      await cp.writeFile(id, '/out/b', 'b');
      const second = await cp.checkpoint(id);
      // The fork stands on the two layers; the parent deletes the checkpoint between them.
      const [fork] = await cp.forkSandbox(id, { checkpointId: second.id, start: false });
      await cp.deleteCheckpoint(id, (await cp.listCheckpoints(id))[0]!.id);
      await cp.writeFile(id, '/out/c', 'c');
      const before = new Set(makers(dirs.dataDir).keys());
      await cp.checkpoint(id); // depth 3 > 2: the lower two are folded, the fork switched with the parent
      await dead;
      await cp.close();
      // Reopened with the compaction still cut short: the fork mounts (and reports its stack) first.
      cp = await open();
      expect(await cp.readFile(fork!.id, '/out/b').then(String)).toBe('b');
      await cp.close();
      dying.step = null;
      cp = await open();
      const finished: ControlPlane = cp;
      await waitFor('the compaction', async () =>
        (await finished.listCheckpoints(id)).every((c) => c.depth <= 2) ? true : undefined,
      );
      const merged = [...makers(dirs.dataDir).entries()].filter(([layer]) => !before.has(layer));
      // The parent's new checkpoint layer and the merged one: both the parent's, none the fork's.
      expect(merged.length).toBeGreaterThanOrEqual(2);
      expect(merged.map(([, maker]) => maker)).toEqual(merged.map(() => id));
    } finally {
      await closePlane(cp, dirs);
    }
  });
});
