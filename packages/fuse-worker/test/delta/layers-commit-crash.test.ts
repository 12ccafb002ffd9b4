// A flatten (the first part of a commit of a delta with frozen layers) interrupted at any moment: every
// host step, metadata record and snapshot of it is tried as the moment the process dies. The reopened
// delta shows exactly the stack's view (times included), its frozen layers are untouched, and a commit
// then leaves the codebase as an uninterrupted one does.
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';

import { Delta } from '../../src/delta/delta.js';
import { flattenFs } from '../../src/delta/flatten-fs.js';
import { MetaJournal } from '../../src/delta/journal.js';
import { layerFs } from '../../src/delta/layer-fs.js';
import { played } from './layers-history.js';
import { codebaseTree, layersState } from './layers-tree.js';
import { viewOf } from './layer-view.js';

// syncfs of the machine's disk would cost 40-200 ms per call (a commit's batches).
vi.mock('../../src/host/sync-fs.js', () => ({
  syncFilesystem: (): Promise<boolean> => Promise.resolve(true),
}));

/** The process "dies" at a step: that step and every later one fail. */
class Crash extends Error {}

/**
 * Makes the `crashAt`-th step die (never, with Infinity): every host operation of layer-fs.ts and
 * flatten-fs.ts, every metadata record and snapshot. Returns the step count and the step at which the
 * first intent removal (the flatten's last step) ran.
 */
function failpoint(crashAt: number): { steps: () => number; flattenEnd: () => number } {
  let steps = 0;
  let dead = false;
  let flattenEnd = -1;
  const wrap = <T extends object>(target: T, names: readonly (keyof T & string)[]): void => {
    for (const name of names) {
      const original = target[name] as (...args: unknown[]) => unknown;
      vi.spyOn(target, name as never).mockImplementation(function (this: unknown, ...args: unknown[]) {
        if (dead) throw new Crash('dead');
        if (steps === crashAt) {
          dead = true;
          throw new Crash(`died before ${name}`);
        }
        if (name === 'unlinkDurably' && flattenEnd < 0) flattenEnd = steps;
        steps++;
        return original.apply(this, args);
      } as never);
    }
  };
  wrap(layerFs, Object.keys(layerFs) as (keyof typeof layerFs)[]);
  wrap(flattenFs, Object.keys(flattenFs) as (keyof typeof flattenFs)[]);
  wrap(MetaJournal.prototype, ['compact', 'record']);
  return { steps: () => steps, flattenEnd: () => flattenEnd };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('a flatten interrupted at any moment', () => {
  it('leaves the view of the stack, the frozen layers untouched, and a later commit correct', async () => {
    const reference = await played(true);
    const counted = failpoint(Number.POSITIVE_INFINITY);
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
      failpoint(crashAt);
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
