// Checkpoint and restore of a delta's writable layer, and finishing either after a crash. A checkpoint
// renames the writable layer's upper/ into a new frozen layer (no file data is copied) and starts an empty
// one; a restore drops the writable layer and switches the stack. Each step is a rename or a whole-file
// write; an intent record (layer-stack.ts) written first says what to finish. The rename of upper/ is the
// point of no return: before it a crash rolls the checkpoint back, after it forward.
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';

import type { MetaJournal } from './journal.js';
import { layerFs } from './layer-fs.js';
import type { MetaState } from './meta-state.js';
import { readIntent, removeIntent, writeIntent, writeStack, type LayersIntent } from './layer-stack.js';
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
 * the caller) and starts an empty one. The caller holds the delta's lock and rebuilds its view from the
 * result. O(1) in the layer's data: renames; the metadata is written once, as a snapshot.
 */
export async function checkpointLayer(c: LayerChangeContext, layerDir: string): Promise<LayerChangeResult> {
  const build = buildDirOf(layerDir);
  // The metadata as one snapshot: the frozen layer's is written from the same state below.
  await c.journal.compact(c.meta);
  const intent: LayersIntent = { version: 1, op: 'checkpoint', layerDir, frozen: [...c.frozen, layerDir] };
  await writeIntent(c.deltaDir, intent);
  // The upper files' data reach the disk before they become a layer nothing rewrites (one syncfs).
  if (!(await layerFs.syncFilesystem(c.deltaDir))) {
    c.logger.warn({ deltaDir: c.deltaDir }, 'no sync executable: a checkpoint survives a process death only');
  }
  await layerFs.mkdir(build);
  await layerFs.mkdir(join(build, 'meta'));
  await layerFs.writeLayerSnapshot(build, c.meta);
  await layerFs.fsyncDir(join(build, 'meta')); // its name: the syncfs above came before it
  // The point of no return: the writable layer's entries now belong to the layer being built.
  await layerFs.rename(join(c.deltaDir, 'upper'), join(build, 'upper'));
  await publishLayer(c.deltaDir, layerDir);
  return finishLayerChange(c, intent);
}

/** Drops the writable layer's content and makes `frozen` the stack (the caller validated the layers). */
export async function restoreLayers(
  c: LayerChangeContext,
  frozen: readonly string[],
): Promise<LayerChangeResult> {
  const intent: LayersIntent = { version: 1, op: 'restore', frozen: [...frozen] };
  await writeIntent(c.deltaDir, intent);
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
    if (!(await exists(intent.layerDir))) {
      if (!(await exists(join(build, 'upper')))) {
        await layerFs.remove(build);
        await removeIntent(c.deltaDir);
        c.logger.warn({ layerDir: intent.layerDir }, 'an interrupted checkpoint was rolled back');
        return null;
      }
      await publishLayer(c.deltaDir, intent.layerDir);
    }
  }
  c.logger.warn({ op: intent.op }, 'an interrupted layer change was finished');
  return finishLayerChange(c, intent);
}

/** The built layer renamed into place, durably (its directory and both parents fsynced). */
async function publishLayer(deltaDir: string, layerDir: string): Promise<void> {
  const build = buildDirOf(layerDir);
  await layerFs.fsyncDir(build);
  await layerFs.rename(build, layerDir);
  await layerFs.fsyncDir(join(layerDir, '..'));
  await layerFs.fsyncDir(deltaDir);
}

/**
 * The steps after the point of no return, each one safe to run again: the stack recorded (the switch),
 * an empty upper/ (a restore removes the old one first), the metadata reset to an empty snapshot of a new
 * generation, the intent removed (durably: a stale intent run again would empty a layer in use).
 */
async function finishLayerChange(
  c: LayerChangeContext,
  intent: Exclude<LayersIntent, { op: 'flatten' }>,
): Promise<LayerChangeResult> {
  await writeStack(c.deltaDir, intent.frozen);
  const upper = join(c.deltaDir, 'upper');
  if (intent.op === 'restore') await layerFs.remove(upper);
  if (!(await exists(upper))) await layerFs.mkdir(upper);
  // A restore's removal must not come back after a power cut once the restore has returned.
  await layerFs.fsyncDir(c.deltaDir);
  const meta = c.journal.reset();
  await removeIntent(c.deltaDir);
  return { frozen: intent.frozen, meta };
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return false;
      throw err;
    },
  );
}
