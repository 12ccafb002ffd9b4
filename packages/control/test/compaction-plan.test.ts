// Which pair of a stack may be folded: never one a checkpoint ends between, never one a fork holds apart,
// never layers of two makers, never one a compaction under way already folds; the lowest one otherwise.
import { describe, expect, it } from 'vitest';
import { foldablePair } from '../src/sandboxes/compaction-plan.js';

const mine = (): string => 'sb_a';

describe('foldablePair', () => {
  it('folds the lowest pair no checkpoint ends between', () => {
    const stack = ['l1', 'l2', 'l3', 'l4'];
    expect(foldablePair({ stack, holders: [stack], makerOf: mine })).toEqual(['l1', 'l2']);
    // A checkpoint ending at l1 keeps that boundary; one ending at l2 the next.
    expect(foldablePair({ stack, holders: [stack, ['l1']], makerOf: mine })).toEqual(['l2', 'l3']);
    expect(foldablePair({ stack, holders: [stack, ['l1'], ['l1', 'l2']], makerOf: mine })).toEqual([
      'l3',
      'l4',
    ]);
  });

  it('finds nothing when every boundary ends a checkpoint', () => {
    const stack = ['l1', 'l2', 'l3'];
    const holders = [stack, ['l1'], ['l1', 'l2']];
    expect(foldablePair({ stack, holders, makerOf: mine })).toBeNull();
  });

  it('keeps a boundary a fork stands on, and layers of different makers apart', () => {
    const stack = ['l1', 'l2', 'l3'];
    // A fork whose writable layer stands on l1 (its own l9 above it).
    expect(foldablePair({ stack, holders: [stack, ['l1', 'l9']], makerOf: mine })).toEqual(['l2', 'l3']);
    const makerOf = (layer: string): string => (layer === 'l1' ? 'sb_parent' : 'sb_a');
    expect(foldablePair({ stack, holders: [stack], makerOf })).toEqual(['l2', 'l3']);
    expect(foldablePair({ stack, holders: [stack], makerOf: () => undefined })).toBeNull();
  });

  it('skips layers a compaction under way folds', () => {
    const stack = ['l1', 'l2', 'l3', 'l4'];
    expect(foldablePair({ stack, holders: [stack], makerOf: mine, busy: new Set(['l2']) })).toEqual([
      'l3',
      'l4',
    ]);
  });
});
