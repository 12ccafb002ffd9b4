// A flatten (the first part of a commit of a delta with frozen layers) interrupted at any moment: every
// host step, metadata record and snapshot of it is tried as the moment the process dies. The reopened
// delta shows exactly the stack's view (times included), its frozen layers are untouched, and a commit
// then leaves the codebase as an uninterrupted one does.
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';

import { Delta } from '../../src/delta/delta.js';
import { flattenFs } from '../../src/delta/flatten-fs.js';
import { MetaJournal } from '../../src/delta/journal.js';
import { layerFs } from '../../src/delta/layer-fs.js';
import { failpoint } from './failpoint.js';
import { played } from './layers-history.js';
import { codebaseTree, layersState } from './layers-tree.js';
import { viewOf } from './layer-view.js';

// syncfs of the machine's disk would cost 40-200 ms per call (a commit's batches).
vi.mock('../../src/host/sync-fs.js', () => ({
  syncFilesystem: (): Promise<boolean> => Promise.resolve(true),
}));

/** The process "dies" at a step: that step and every later one fail. */
/**
 * Makes the `crashAt`-th step die (never, with Infinity): every host operation of layer-fs.ts and
 * flatten-fs.ts, every metadata record and snapshot. Returns the step count and the step at which the
 * first intent removal (the flatten's last step) ran.
 */
function crashingAt(crashAt: number): { steps: () => number; flattenEnd: () => number } {
  let flattenEnd = -1;
  const point = failpoint(crashAt, (name, step) => {
    if (name === 'unlinkDurably' && flattenEnd < 0) flattenEnd = step;
  });
  point.wrap(layerFs).wrap(flattenFs).wrap(MetaJournal.prototype, ['compact', 'record']);
  return { steps: () => point.steps(), flattenEnd: () => flattenEnd };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('a flatten interrupted at any moment', () => {
  it('leaves the view of the stack, the frozen layers untouched, and a later commit correct', async () => {
    const reference = await played(true);
    const counted = crashingAt(Number.POSITIVE_INFINITY);
    const expected = await reference.delta.commit({ mode: 'detect-conflicts' });
    const total = counted.flattenEnd() + 1;
    vi.restoreAllMocks();
    expect(total).toBeGreaterThan(20);
    const codebase = await codebaseTree(reference.lower);

    const seen = new Set<string>();
    for (let crashAt = 0; crashAt < total; crashAt++) {
      const f = await played(true);
      const view = await viewOf(f.delta);
      const frozen = await layersState(f.layers);
      crashingAt(crashAt);
      await expect(
        f.delta.commit({ mode: 'detect-conflicts' }),
        `crash at ${String(crashAt)}`,
      ).rejects.toThrow(/died before/);
      vi.restoreAllMocks();
      // The next worker opens the same delta; its caller still names the stack it knew.
      const again = await Delta.open({ lowerDir: f.lower, deltaDir: f.deltaDir, frozen: f.layers });
      onTestFinished(() => again.close());
      seen.add(again.frozenLayers.length === 0 ? 'after' : 'before');
      expect({ crashAt, view: await viewOf(again) }).toEqual({ crashAt, view });
      expect(await layersState(f.layers)).toEqual(frozen);
      expect(await again.commit({ mode: 'detect-conflicts' })).toEqual(expected);
      expect({ crashAt, codebase: await codebaseTree(f.lower) }).toEqual({ crashAt, codebase });
      expect(again.frozenLayers).toEqual([]);
    }
    expect([...seen].sort()).toEqual(['after', 'before']);
  }, 240_000);
});
