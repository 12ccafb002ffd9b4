// The change set and diff of a delta with frozen layers: the net change of the stack against the
// codebase, exactly what one delta doing the same work without checkpoints reports; and read-only.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { write } from './fixture.js';
import { played } from './layers-history.js';
import { hostState, untimed, viewOf } from './layer-view.js';

describe('changes and diff of a stack', () => {
  it('report exactly what one delta doing the same work reports', async () => {
    const single = await played(false);
    const stacked = await played(true);
    expect(stacked.delta.frozenLayers).toHaveLength(2);
    expect(untimed(await viewOf(stacked.delta))).toEqual(untimed(await viewOf(single.delta)));
    const changes = await single.delta.changes();
    expect(changes.map((c) => `${c.kind} ${c.path}`)).toEqual([
      'modified /a.txt',
      'deleted /b.txt',
      'modified /c.txt',
      'modified /d/sub',
      'modified /d/sub/y',
      'modified /e/z',
      'deleted /gone.txt',
      'added /ln',
      'modified /mode.sh',
      'added /new',
      'added /new/f',
      'added /new/g',
      'added /new/up',
    ]);
    expect(await stacked.delta.changes()).toEqual(changes);
    expect(await stacked.delta.changes({ paths: ['/new', '/d'] })).toEqual(
      await single.delta.changes({ paths: ['/new', '/d'] }),
    );
    const diff = await single.delta.diff();
    expect(diff.diff).toContain('+two');
    expect(await stacked.delta.diff()).toEqual(diff);
    const items = async (delta: typeof single.delta): Promise<unknown[]> => {
      const out: unknown[] = [];
      const it = await delta.diffItems({ paths: ['/a.txt', '/ln', '/new'] });
      for (let next = await it.next(); next.done !== true; next = await it.next()) out.push(next.value);
      return out;
    };
    expect(await items(stacked.delta)).toEqual(await items(single.delta));
  });

  it('reports a change made in one layer only, and nothing for an add undone in the next', async () => {
    const single = await played(false);
    const stacked = await played(true);
    for (const { delta, root } of [single, stacked]) {
      await write(delta, '/later', 'L');
      await delta.unlink('/later');
      if (delta === stacked.delta) await delta.checkpoint({ layerDir: join(root, 'l3') });
      await delta.unlink('/new/g');
    }
    expect(stacked.delta.frozenLayers).toHaveLength(3);
    expect(await stacked.delta.changes()).toEqual(await single.delta.changes());
    expect(await stacked.delta.diff()).toEqual(await single.delta.diff());
  });

  it('copies nothing and changes no layer', async () => {
    const f = await played(true);
    const before = await Promise.all([...f.layers, f.deltaDir, f.lower].map((dir) => hostState(dir)));
    await f.delta.changes();
    await f.delta.diff();
    expect(await Promise.all([...f.layers, f.deltaDir, f.lower].map((dir) => hostState(dir)))).toEqual(
      before,
    );
    expect(f.delta.frozenLayers).toEqual(f.layers);
  });
});
