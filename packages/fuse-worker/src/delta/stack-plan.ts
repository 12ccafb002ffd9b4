// A stack of layers (the frozen ones, oldest first, then the writable one) in the terms of one delta over
// the codebase: which layer serves each entry the layers hold, every layer's whiteouts, and for each path
// the base of the lowest layer that recorded one (first sight of the codebase wins across the stack too).
// Read-only: the change set and diff of a stack (stack-changes.ts) and the plan of a flatten (flatten.ts).
import type { BigIntStats } from 'node:fs';

import { walkTree } from '../host/walk.js';
import { Yielder } from '../host/yielder.js';
import { upperStat, type LayerView } from './context.js';
import { MetaState } from './meta-state.js';

/** An upper entry of some layer that the stack's view shows. */
export interface LayerEntry {
  readonly rel: string;
  readonly st: BigIntStats;
  /** Index in the plan's `layers` of the layer serving it. */
  readonly layer: number;
}

export interface StackPlan {
  /** Oldest first; the last is the writable layer. */
  readonly layers: readonly LayerView[];
  /** Every upper entry the view shows, by path, parents before children. */
  readonly entries: ReadonlyMap<string, LayerEntry>;
  /** Every layer's whiteouts, and the lowest layer's base of each path. */
  readonly meta: MetaState;
}

/**
 * The plan of `layers` (oldest first, the writable one last). Shown through one delta with `meta` over the
 * codebase, `entries` look exactly as the stack does (README: a whiteout of any layer hides what the
 * codebase has there, and an entry a higher layer hid is not among them). Cost: one walk of each layer's
 * upper tree, and per entry of a frozen layer one lstat in each layer above it.
 */
export async function planStack(layers: readonly LayerView[]): Promise<StackPlan> {
  const meta = new MetaState();
  for (const layer of layers) {
    for (const rel of layer.meta.whiteoutPaths()) meta.apply({ op: 'whiteout', path: rel });
    // Oldest first, and 'base' keeps the first one recorded.
    for (const [rel, base] of layer.meta.snapshot(0).bases) meta.apply({ op: 'base', path: rel, base });
  }
  const entries = new Map<string, LayerEntry>();
  const yielder = new Yielder();
  for (let layer = layers.length - 1; layer >= 0; layer--) {
    const found: { rel: string; st: BigIntStats }[] = [];
    await walkTree((layers[layer] as LayerView).upper.path, {
      onEntry: (st, rel) => {
        found.push({ rel, st });
      },
    });
    for (const { rel, st } of found) {
      await yielder.maybe();
      if (!entries.has(rel) && (await shownFrom(layers, layer, rel))) entries.set(rel, { rel, st, layer });
    }
  }
  return { layers, entries: parentsFirst(entries), meta };
}

/** Whether the upper entry at `rel` of layer `index` is what the stack shows: no layer above hides it. */
async function shownFrom(layers: readonly LayerView[], index: number, rel: string): Promise<boolean> {
  for (let above = index + 1; above < layers.length; above++) {
    const layer = layers[above] as LayerView;
    // As resolve() asks: the upper entry first (it wins, or an ancestor blocks), then the whiteouts.
    if ((await upperStat(layer, rel)) !== 'missing' || layer.meta.isHidden(rel)) return false;
  }
  return true;
}

/** The entries sorted by path, so a directory comes before what it holds. */
function parentsFirst(entries: Map<string, LayerEntry>): Map<string, LayerEntry> {
  const rels = [...entries.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return new Map(rels.map((rel) => [rel, entries.get(rel) as LayerEntry]));
}
