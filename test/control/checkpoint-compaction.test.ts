// Background compaction of a stack deeper than maxStackDepth, on real sandboxes: the checkpoint that
// takes the stack past the limit succeeds at once, two layers no checkpoint ends between are folded in
// the background, and nothing anyone sees changes (a running reader, the files with their modes, times,
// symlinks and hard links, a fork on the same layers, every checkpoint restored, the change set and the
// diff). The folded layers leave the disk, the merged one is charged as measured, and a compaction cut
// short at any step is finished or dropped by the next open with no leftover.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import type { CompactionStep } from '@agentfense/control';
import { layerBytes } from '@agentfense/fuse-worker';
import { closePlane, makeDirs, waitFor, runOk } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';
import { openRecordsDb } from '../helpers/records-db.js';

/** Every path of the workspace with type, mode, link count, mtime, and content or target. */
const SHOW = [
  'cd /workspace && find . -path ./secrets -prune -o -print | LC_ALL=C sort | while read -r p; do',
  '  if [ -L "$p" ]; then echo "$p L $(stat -c "%Y" "$p") -> $(readlink "$p")";',
  '  elif [ -d "$p" ]; then echo "$p D $(stat -c "%a %Y" "$p")";',
  '  else echo "$p F $(stat -c "%a %h %Y" "$p") $(cat "$p")"; fi',
  'done',
].join('\n');

/** The steps of a session: each leaves a checkpoint. */
const STEPS = [
  'echo one > out/a && mkdir -p out/d && echo d1 > out/d/f && ln -s a out/ln && ln out/a out/hard && ' +
    'rm docs/guide.md && chmod 600 src/app.py && touch -d @1000000000 out/d/f',
  'echo two > out/a2 && rm -r out/d && mkdir out/d && echo d2 > out/d/g && rm out/ln && ln -s d/g out/ln2 && ' +
    'chmod 700 out/d && touch -d @1100000000 out/d',
  'echo three > out/b && rm src/util.py && mkdir -p docs && echo again > docs/new.md',
  'echo four > out/c && echo 4 >> out/b',
].map((s) => `cd /workspace && ${s}`);

describe('stack compaction', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    dirs = await makeDirs({ ...FILES });
    cp = await ControlPlane.open({ dataDir: dirs.dataDir, checkpoints: { maxStackDepth: 3 } });
    codebaseId = (await cp.linkCodebase({ path: dirs.repo })).id;
  });
  afterAll(() => closePlane(cp, dirs));

  const show = (id: string): Promise<string> => runOk(cp, id, SHOW);
  const sh = async (id: string, command: string): Promise<void> => void (await runOk(cp, id, command));
  const layersOnDisk = async (): Promise<string[]> => (await readdir(join(dirs.dataDir, 'layers'))).sort();

  it('folds two layers in the background with nothing seen changing, a reader and a fork included', async () => {
    const { id } = await cp.createSandbox({ codebaseId, preset: 'full-access' });
    await cp.startSandbox(id);
    const seen: string[] = [];
    const taken = [];
    for (const step of STEPS.slice(0, 3)) {
      await sh(id, step);
      taken.push(await cp.checkpoint(id));
      seen.push(await show(id));
    }
    // The second checkpoint goes: the boundary it ended may be folded once the stack is too deep.
    await cp.deleteCheckpoint(id, taken[1]!.id);
    const [fork] = await cp.forkSandbox(id, { checkpointId: taken[2]!.id });
    const forkSeen = await show(fork!.id);
    expect(forkSeen).toBe(seen[2]);
    await sh(id, STEPS[3]!);
    const before = { show: await show(id), changes: await cp.changes(id), diff: await cp.diff(id) };
    const layersBefore = await layersOnDisk();
    expect(layersBefore).toHaveLength(3);
    // A reader running across the compaction: every read sees the same content.
    const reader = cp.run(
      id,
      'cd /workspace && want="$(cat out/a out/hard out/b out/d/g docs/new.md)" && for i in $(seq 1 60); do ' +
        '[ "$(cat out/a out/hard out/b out/d/g docs/new.md)" = "$want" ] || echo BAD; sleep 0.05; done; echo done',
    );
    const fourth = await cp.checkpoint(id); // depth 4 > 3: taken at once, compacted after
    expect(fourth.depth).toBe(4);
    await waitFor(
      'the compaction',
      async () => ((await layersOnDisk()).length === 3 ? true : undefined),
      20_000,
    );
    const read = await reader;
    expect(read.stdout.trim()).toBe('done');
    const after = await layersOnDisk();
    // The folded pair left, the merged layer took its place, and nothing half-built is left.
    expect(after.filter((name) => layersBefore.includes(name))).toHaveLength(1);
    expect(after.every((name) => /^ly_[0-9a-f-]+$/.test(name))).toBe(true);
    expect((await cp.listCheckpoints(id)).map((c) => c.depth)).toEqual([1, 2, 3]);
    expect({ show: await show(id), changes: await cp.changes(id), diff: await cp.diff(id) }).toEqual(before);
    // The fork stood on the pair too: switched, the same view.
    expect(await show(fork!.id)).toBe(forkSeen);
    // Each checkpoint left restores exactly what it froze.
    const fourthSeen = await show(id);
    await cp.restoreCheckpoint(id, taken[0]!.id);
    expect(await show(id)).toBe(seen[0]);
    await cp.restoreCheckpoint(id, taken[2]!.id);
    expect(await show(id)).toBe(seen[2]);
    await cp.restoreCheckpoint(id, fourth.id);
    expect(await show(id)).toBe(fourthSeen);
    // The merged layer is charged to the sandbox as measured; the audit trail records the compaction.
    // The merged layer is the one the compaction's audit record names (the fourth checkpoint's layer is
    // new on disk too, so "not there before" does not tell them apart).
    const compactions = (await cp.audit(id)).filter((e) => e.op === 'compact').map((e) => e.target);
    expect(compactions).toHaveLength(1);
    const merged = compactions[0] as string;
    expect(after).toContain(merged);
    expect(layersBefore).not.toContain(merged);
    const db = openRecordsDb(dirs.dataDir);
    const rows = db.prepare('SELECT id, maker_id, bytes FROM layers WHERE maker_id = ?').all(id) as {
      id: string;
      bytes: number | null;
    }[];
    db.close();
    expect(rows.map((r) => r.id).sort()).toEqual(after.filter((name) => name !== 'trash').sort());
    // Every layer, merged or frozen by the sandbox as its quota counted it, is charged what it holds.
    for (const row of rows) {
      expect(row.bytes, row.id).toBe(await layerBytes(join(dirs.dataDir, 'layers', row.id)));
    }
    await cp.destroySandbox(fork!.id);
    await cp.destroySandbox(id);
  });

  it('refuses a checkpoint past the limit only when every boundary is a checkpoint, naming it', async () => {
    const { id } = await cp.createSandbox({ codebaseId, preset: 'full-access' });
    for (let i = 0; i < 3; i++) await cp.checkpoint(id);
    await expect(cp.checkpoint(id)).rejects.toThrow(
      /stands on 3 frozen layers, the deepest stack allowed \(checkpoints\.maxStackDepth \/ AGENTFENSE_MAX_STACK_DEPTH\), and each of them ends a checkpoint/,
    );
    await cp.deleteCheckpoint(id, (await cp.listCheckpoints(id))[1]!.id);
    await cp.checkpoint(id);
    await waitFor(
      'the compaction',
      async () => ((await cp.listCheckpoints(id)).every((c) => c.depth <= 3) ? true : undefined),
      20_000,
    );
    await cp.destroySandbox(id);
  });
});

const FILES = {
  'README.md': '# demo\n',
  'src/app.py': 'print("hello")\n',
  'src/util.py': 'def f():\n    return 1\n',
  'docs/guide.md': 'guide\n',
  'out/.keep': '',
};

describe('a compaction cut short', () => {
  for (const step of ['planned', 'built', 'switched', 'recorded'] as CompactionStep[]) {
    it(`at "${step}" is finished or dropped by the next open, with nothing seen changing`, async () => {
      const dirs = await makeDirs({ ...FILES });
      let died: () => void = () => undefined;
      const dead = new Promise<void>((resolve) => {
        died = resolve;
      });
      let cp: ControlPlane | undefined = await ControlPlane.open({
        dataDir: dirs.dataDir,
        checkpoints: { maxStackDepth: 2 },
        compactionFault: (at) => {
          if (at !== step) return;
          died();
          throw new Error(`died at ${at}`);
        },
      });
      try {
        const codebaseId = (await cp.linkCodebase({ path: dirs.repo })).id;
        const { id } = await cp.createSandbox({ codebaseId, preset: 'full-access' });
        const views: string[] = [];
        const read = async (plane: ControlPlane): Promise<string> => {
          const parts = [];
          for (const p of ['/out/a', '/out/b', '/out/c', '/src/util.py']) {
            parts.push(await plane.readFile(id, p).then(String, () => '-'));
          }
          return parts.join('|');
        };
        // Two checkpoints, the second deleted (its boundary may be folded), then a third: depth 3 > 2.
        await cp.writeFile(id, '/out/a', 'v0');
        await cp.checkpoint(id);
        views.push(await read(cp));
        await cp.writeFile(id, '/out/b', 'v1');
        await cp.writeFile(id, '/out/a', 'changed');
        await cp.deleteCheckpoint(id, (await cp.checkpoint(id)).id);
        await cp.writeFile(id, '/out/c', 'v2');
        await cp.checkpoint(id);
        views.push(await read(cp));
        await dead;
        await cp.close();
        cp = await ControlPlane.open({ dataDir: dirs.dataDir, checkpoints: { maxStackDepth: 2 } });
        const plane = cp;
        await waitFor(
          'the compaction',
          async () => ((await plane.listCheckpoints(id)).every((c) => c.depth <= 2) ? true : undefined),
          20_000,
        );
        expect(await read(plane)).toBe(views[1]);
        const layers = await readdir(join(dirs.dataDir, 'layers'));
        expect(
          layers.every((name) => /^ly_[0-9a-f-]+$/.test(name)),
          layers.join(' '),
        ).toBe(true);
        await waitFor(
          'the pair removed',
          async () => ((await readdir(join(dirs.dataDir, 'layers'))).length === 2 ? true : undefined),
          20_000,
        );
        const [first, last] = await plane.listCheckpoints(id);
        await plane.restoreCheckpoint(id, first!.id);
        expect(await read(plane)).toBe(views[0]);
        await plane.restoreCheckpoint(id, last!.id);
        expect(await read(plane)).toBe(views[1]);
      } finally {
        await closePlane(cp, dirs);
      }
    });
  }
});
