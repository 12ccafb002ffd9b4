// Checkpoint and restore of a delta's writable layer, and finishing either after a crash. A checkpoint
// renames the writable layer's upper/ into a new frozen layer and gives it the writable layer's metadata
// files as they are (hard links to its snapshot and journal): nothing is copied or rewritten, O(1) in the
// layer's size. A restore renames the writable upper/ into the trash (emptied in the background, trash.ts)
// and switches the stack. Each step is a rename, a link, a mkdir or the intent's write; the intent record
// (layer-stack.ts), written first, says what to finish. For a checkpoint the rename of upper/ is the point
// of no return: before it a crash rolls the checkpoint back, after it forward. The last step renames the
// intent to meta/stack.json: the switch and the intent's end in one.
import { lstatSync } from 'node:fs';
import { join } from 'node:path';

import { FROZEN_MARKER } from './frozen-view.js';
import type { MetaJournal } from './journal.js';
import { layerFs } from './layer-fs.js';
import type { MetaState } from './meta-state.js';
import {
  readIntent,
  removeIntent,
  switchToIntentStack,
  writeLayerChangeIntent,
  type LayersIntent,
} from './layer-stack.js';
import { trashDirOf, trashNameIn } from './trash.js';
import type { DeltaLogger } from './types.js';

/** What a layer change works on: the delta directory, its metadata journal and state, its stack. */
export interface LayerChangeContext {
  readonly deltaDir: string;
  readonly journal: MetaJournal;
  readonly meta: MetaState;
  readonly frozen: readonly string[];
  readonly logger: DeltaLogger;
}

/** The delta after a layer change: its stack and the (empty) state of its new writable layer. */
export interface LayerChangeResult {
  readonly frozen: readonly string[];
  readonly meta: MetaState;
}

/** Where a checkpoint builds its layer before renaming it into place. */
export function buildDirOf(layerDir: string): string {
  return `${layerDir}.tmp`;
}

/**
 * Freezes the writable layer into `layerDir` (absent; its parent on the delta's filesystem, checked by
 * the caller) and starts an empty one. The caller holds the delta's lock (no record is appended meanwhile)
 * and rebuilds its view from the result. O(1) in the layer's size: renames and links.
 */
export async function checkpointLayer(c: LayerChangeContext, layerDir: string): Promise<LayerChangeResult> {
  const build = buildDirOf(layerDir);
  const intent: LayersIntent = { version: 1, op: 'checkpoint', layerDir, frozen: [...c.frozen, layerDir] };
  await writeLayerChangeIntent(c.deltaDir, intent);
  await layerFs.mkdir(build);
  await layerFs.mkdir(join(build, 'meta'));
  await layerFs.createEmpty(join(build, 'meta', FROZEN_MARKER));
  // The writable layer's metadata as it is: its snapshot (if any) and its journal, which the reset below
  // unlinks from the delta's meta/ (these links stay) and never writes again.
  for (const name of c.journal.files()) {
    await layerFs.link(join(c.deltaDir, 'meta', name), join(build, 'meta', name));
  }
  // The point of no return: the writable layer's entries now belong to the layer being built.
  await layerFs.rename(join(c.deltaDir, 'upper'), join(build, 'upper'));
  await layerFs.rename(build, layerDir);
  return finishLayerChange(c, intent);
}

/** Drops the writable layer's content and makes `frozen` the stack (the caller validated the layers). */
export async function restoreLayers(
  c: LayerChangeContext,
  frozen: readonly string[],
): Promise<LayerChangeResult> {
  const intent: LayersIntent = { version: 1, op: 'restore', frozen: [...frozen] };
  await writeLayerChangeIntent(c.deltaDir, intent);
  return finishLayerChange(c, intent);
}

/**
 * Finishes the layer change a crash interrupted, if any: forward once the writable layer's upper/ has
 * left the delta (or for a restore, which drops it anyway), else back (the half-built layer removed).
 * Null when there was nothing to finish or it was rolled back (the delta is as before the change).
 */
export async function resumeLayerChange(c: LayerChangeContext): Promise<LayerChangeResult | null> {
  const intent = await readIntent(c.deltaDir);
  // A flatten needs the stack open to finish: Delta.open and Delta finish it (flatten.ts).
  if (intent === null || intent.op === 'flatten') return null;
  if (intent.op === 'checkpoint') {
    const build = buildDirOf(intent.layerDir);
    if (!exists(intent.layerDir)) {
      if (!exists(join(build, 'upper'))) {
        await layerFs.remove(build);
        await removeIntent(c.deltaDir);
        c.logger.warn({ layerDir: intent.layerDir }, 'an interrupted checkpoint was rolled back');
        return null;
      }
      await layerFs.rename(build, intent.layerDir);
    }
  }
  c.logger.warn({ op: intent.op }, 'an interrupted layer change was finished');
  return finishLayerChange(c, intent);
}

/**
 * The steps after the point of no return, each one safe to run again: an empty upper/ (a restore first
 * renames the old one into the trash: one step, whatever its size; run again, it trashes the empty upper/
 * this made), the metadata reset to the empty state (unlinks: O(1), no fsync), and the switch (the intent
 * renamed to stack.json).
 */
async function finishLayerChange(
  c: LayerChangeContext,
  intent: Exclude<LayersIntent, { op: 'flatten' }>,
): Promise<LayerChangeResult> {
  const upper = join(c.deltaDir, 'upper');
  if (intent.op === 'restore' && exists(upper)) {
    if (!exists(trashDirOf(c.deltaDir))) await layerFs.mkdir(trashDirOf(c.deltaDir));
    await layerFs.rename(upper, trashNameIn(c.deltaDir));
  }
  if (!exists(upper)) await layerFs.mkdir(upper);
  const meta = c.journal.reset();
  await switchToIntentStack(c.deltaDir);
  return { frozen: intent.frozen, meta };
}

/** Whether `path` exists (a synchronous lstat: one name in the worker's own directory). */
function exists(path: string): boolean {
  return lstatSync(path, { throwIfNoEntry: false }) !== undefined;
}
