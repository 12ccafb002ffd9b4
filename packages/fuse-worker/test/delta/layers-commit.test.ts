// Commit and partial discard of a delta with frozen layers: the stack is flattened into the writable
// layer first, so the codebase ends exactly as one delta doing the same work would leave it, conflicts are
// judged against the lowest layer's bases, and no frozen layer is ever written.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { read } from './fixture.js';
import { played } from './layers-history.js';
import { untimed, viewOf } from './layer-view.js';
import { codebaseTree, layersState } from './layers-tree.js';

describe('commit of a stack', () => {
  it('writes the codebase exactly as one delta doing the same work, and leaves no frozen layer', async () => {
    const single = await played(false);
    const stacked = await played(true);
    const frozen = await layersState(stacked.layers);
    const expected = await single.delta.commit({ mode: 'detect-conflicts' });
    expect(expected.conflicts).toEqual([]);
    expect(expected.applied.length).toBeGreaterThan(10);
    const result = await stacked.delta.commit({ mode: 'detect-conflicts' });
    expect(result).toEqual(expected);
    expect(await codebaseTree(stacked.lower)).toEqual(await codebaseTree(single.lower));
    expect(await readFile(join(stacked.lower, 'a.txt'), 'utf8')).toBe('A\none\ntwo\n');
    expect(stacked.delta.frozenLayers).toEqual([]);
    expect(await stacked.delta.changes()).toEqual([]);
    expect(untimed(await viewOf(stacked.delta))).toEqual(untimed(await viewOf(single.delta)));
    expect(await layersState(stacked.layers)).toEqual(frozen);
    // Reopened, the delta is over the codebase alone.
    const again = await stacked.open();
    expect(again.frozenLayers).toEqual([]);
    expect(await again.changes()).toEqual([]);
  });

  it('commits the given paths only, the rest stays in the sandbox', async () => {
    const single = await played(false);
    const stacked = await played(true);
    const paths = ['/new', '/b.txt', '/d/sub'];
    expect(await stacked.delta.commit({ mode: 'detect-conflicts', paths })).toEqual(
      await single.delta.commit({ mode: 'detect-conflicts', paths }),
    );
    expect(await codebaseTree(stacked.lower)).toEqual(await codebaseTree(single.lower));
    expect(await stacked.delta.changes()).toEqual(await single.delta.changes());
    expect((await stacked.delta.changes()).map((c) => c.path)).toContain('/a.txt');
    expect(untimed(await viewOf(stacked.delta))).toEqual(untimed(await viewOf(single.delta)));
  });

  it('judges conflicts by the base of the lowest layer: reported, or overwritten by last-writer-wins', async () => {
    const f = await played(true);
    // Changed behind the sandbox after layer 1 recorded its base of a.txt (layer 3 changed a.txt again).
    await writeFile(join(f.lower, 'a.txt'), 'someone else\n');
    const detect = await f.delta.commit({ mode: 'detect-conflicts' });
    expect(detect.conflicts).toEqual([
      { path: '/a.txt', reason: 'changed in the codebase since the sandbox first saw it' },
    ]);
    expect(detect.applied.map((c) => c.path)).toContain('/new/f');
    expect(await readFile(join(f.lower, 'a.txt'), 'utf8')).toBe('someone else\n');
    expect(await read(f.delta, '/a.txt')).toBe('A\none\ntwo\n');
    expect(f.delta.frozenLayers).toEqual([]);
    const lww = await f.delta.commit({ mode: 'last-writer-wins' });
    expect(lww.applied.map((c) => c.path)).toEqual(['/a.txt']);
    expect(await readFile(join(f.lower, 'a.txt'), 'utf8')).toBe('A\none\ntwo\n');
  });
});

describe('discard of some paths of a stack', () => {
  it('drops them as one delta would, and keeps the view of everything else exactly', async () => {
    const single = await played(false);
    const stacked = await played(true);
    const frozen = await layersState(stacked.layers);
    const before = await viewOf(stacked.delta);
    // Unchanged paths: the flatten alone, which must not change the view, times included.
    await stacked.delta.discard({ paths: ['/keep'] });
    expect(stacked.delta.frozenLayers).toEqual([]);
    expect(await viewOf(stacked.delta)).toEqual(before);
    for (const delta of [single.delta, stacked.delta])
      await delta.discard({ paths: ['/a.txt', '/new', '/d'] });
    expect(await stacked.delta.changes()).toEqual(await single.delta.changes());
    expect(untimed(await viewOf(stacked.delta))).toEqual(untimed(await viewOf(single.delta)));
    expect(await read(stacked.delta, '/a.txt')).toBe('A\n');
    expect(await stacked.delta.lookup('/new')).toBeNull();
    expect(await layersState(stacked.layers)).toEqual(frozen);
    await stacked.delta.commit({ mode: 'detect-conflicts' });
    await single.delta.commit({ mode: 'detect-conflicts' });
    expect(await codebaseTree(stacked.lower)).toEqual(await codebaseTree(single.lower));
  });
});
