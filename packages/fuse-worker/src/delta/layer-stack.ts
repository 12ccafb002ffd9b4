// The delta's record of its frozen layers (meta/stack.json) and the intent of a layer change under way
// (meta/layers-intent.json). Each is written whole, so anything unreadable is damage, reported as such.
// A checkpoint's or restore's intent is a symlink whose target is the record (layerFs.symlink: no fsync,
// never half there after a power cut), renamed into stack.json as the switch; a record too long for a
// symlink, and every other write, is a file (temporary file, fsync, rename). Readers take either.
import { readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';

import { layerFs } from './layer-fs.js';

const STACK = 'stack.json';
const INTENT = 'layers-intent.json';

/** A layer change under way: what the stack becomes, and for a checkpoint the layer it makes. */
export type LayersIntent =
  | {
      readonly version: 1;
      readonly op: 'checkpoint';
      readonly layerDir: string;
      readonly frozen: readonly string[];
    }
  | { readonly version: 1; readonly op: 'restore'; readonly frozen: readonly string[] }
  | FlattenIntent;

/**
 * A flatten under way (flatten.ts): the stack it started from, the times of the writable directories it
 * puts entries into (restored after), and whether it reached its switch (then it is only rolled forward).
 */
export interface FlattenIntent {
  readonly version: 1;
  readonly op: 'flatten';
  readonly from: readonly string[];
  readonly frozen: readonly [];
  /** [path, atime ns, mtime ns] of each writable directory that receives a copy. */
  readonly times: readonly (readonly [string, string, string])[];
  readonly switching: boolean;
}

/** The frozen layers of the delta at `deltaDir`, oldest first; [] when it never had any. */
export async function readStack(deltaDir: string): Promise<string[]> {
  const value = await readJson(join(deltaDir, 'meta', STACK));
  if (value === null) return [];
  const v = value as { version?: unknown; frozen?: unknown };
  if (v.version !== 1 || !isPathList(v.frozen)) throw damaged(STACK);
  return v.frozen;
}

/** Records `frozen` as the delta's stack, durably: the switch of a checkpoint or a restore. */
export async function writeStack(deltaDir: string, frozen: readonly string[]): Promise<void> {
  await layerFs.writeFileDurably(join(deltaDir, 'meta', STACK), JSON.stringify({ version: 1, frozen }));
}

/** The layer change under way, or null. */
export async function readIntent(deltaDir: string): Promise<LayersIntent | null> {
  const value = await readJson(join(deltaDir, 'meta', INTENT));
  if (value === null) return null;
  const v = value as Partial<Record<'version' | 'op' | 'layerDir' | 'frozen' | 'from' | 'times', unknown>> & {
    switching?: unknown;
  };
  const ok =
    v.version === 1 &&
    isPathList(v.frozen) &&
    (v.op === 'restore' ||
      (v.op === 'checkpoint' && typeof v.layerDir === 'string') ||
      (v.op === 'flatten' && isPathList(v.from) && isTimes(v.times) && typeof v.switching === 'boolean'));
  if (!ok) throw damaged(INTENT);
  return value as LayersIntent;
}

/** Records a layer change before its first step (durably). */
export async function writeIntent(deltaDir: string, intent: LayersIntent): Promise<void> {
  await layerFs.writeFileDurably(join(deltaDir, 'meta', INTENT), JSON.stringify(intent));
}

/**
 * Records a checkpoint or restore before its first step: a symlink carrying the record (whole or absent
 * after a power cut, with no fsync); a record longer than the filesystem takes as a symlink target is a
 * file whose data is fsynced before its rename (README, "Frozen layers", the decision on fsyncs).
 */
export async function writeLayerChangeIntent(deltaDir: string, intent: LayersIntent): Promise<void> {
  const path = join(deltaDir, 'meta', INTENT);
  const text = JSON.stringify(intent);
  try {
    await layerFs.symlink(text, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENAMETOOLONG') throw err;
    await layerFs.writeFileSynced(path, text);
  }
}

/**
 * The switch of a checkpoint or restore, and the end of its intent, in one rename: the intent becomes
 * meta/stack.json (a stack record is `{ version: 1, frozen }`; the intent's other fields are ignored by
 * readStack). A symlink record is renamed as it is: stack.json is then a symlink too.
 */
export async function switchToIntentStack(deltaDir: string): Promise<void> {
  await layerFs.rename(join(deltaDir, 'meta', INTENT), join(deltaDir, 'meta', STACK));
}

/** The layer change is complete: its intent goes, durably (a stale intent must never run again). */
export async function removeIntent(deltaDir: string): Promise<void> {
  await layerFs.unlinkDurably(join(deltaDir, 'meta', INTENT));
}

/** Whether two stacks name the same layers in the same order. */
export function sameStack(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((dir, i) => dir === b[i]);
}

function isPathList(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((p) => typeof p === 'string' && p.startsWith('/'));
}

function isTimes(value: unknown): boolean {
  return (
    Array.isArray(value) &&
    value.every((t) => Array.isArray(t) && t.length === 3 && t.every((x) => typeof x === 'string'))
  );
}

function damaged(name: string): Error {
  return new Error(`the delta's meta/${name} is damaged: not a record of this version`);
}

/** A record's text: a symlink's target, or a file's content; null when there is none. */
async function readRecord(path: string): Promise<string | null> {
  try {
    return await readlink(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code !== 'EINVAL') throw err; // EINVAL: not a symlink, a file record
  }
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

async function readJson(path: string): Promise<unknown> {
  const text = await readRecord(path);
  if (text === null) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return {}; // reported as damage by the caller
  }
}
