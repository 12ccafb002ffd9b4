// Where a checkpoint may put its frozen layer: a new directory beside (never inside) the delta and the
// codebase, on the delta's filesystem, since the writable layer's upper/ is renamed into it. The checks are
// synchronous stats and realpath(3)s of the worker's own directories (µs each; a thread-pool trip apiece
// was a millisecond of a checkpoint's few).
import { lstatSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve as absolute } from 'node:path';

import { FsError } from '../errors.js';
import { buildDirOf } from './layer-change.js';

/** True when `path` is `dir` or below it (both absolute and normalized). */
function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

function absent(path: string): boolean {
  return lstatSync(path, { throwIfNoEntry: false }) === undefined;
}

/** The real path of `path`, or the error `fail` gives when it cannot be resolved. */
function realOr(path: string, fail: () => Error): string {
  try {
    return realpathSync.native(path);
  } catch {
    throw fail();
  }
}

/** Throws unless the layer at `real` (named `name`) lies outside the delta and the codebase, and they outside it. */
function refuseOverlap(
  real: string,
  name: string,
  o: { readonly deltaDir: string; readonly codebaseDir: string },
): void {
  for (const dir of [o.deltaDir, o.codebaseDir]) {
    const other = realpathSync.native(dir);
    if (within(real, other) || within(other, real)) {
      throw new FsError('EINVAL', `a frozen layer cannot be at ${name}: it overlaps ${other}`);
    }
  }
}

/**
 * Checks the frozen layers of a stack to open or restore: each outside the delta and the codebase (the
 * delta's own directory has the shape of a layer, and would be written through).
 */
export function checkLayerDirs(o: { dirs: readonly string[]; deltaDir: string; codebaseDir: string }): void {
  for (const dir of o.dirs) {
    const real = realOr(dir, () => new FsError('ENOENT', `no frozen layer at ${dir}`));
    refuseOverlap(real, dir, o);
  }
}

/**
 * The absolute path of a new frozen layer at `layerDir`, checked: absent (and its build directory too),
 * its parent an existing directory on the delta's filesystem (EXDEV otherwise), outside the delta and the
 * codebase (anything there would show in a view or be committed).
 */
export function checkLayerTarget(o: { layerDir: string; deltaDir: string; codebaseDir: string }): string {
  // Recorded as given (absolute): a caller naming the stack names it the same way. Compared for
  // overlaps through the real path of its parent.
  const layerDir = absolute(o.layerDir);
  const parent = realOr(
    dirname(layerDir),
    () => new FsError('ENOENT', `the parent of ${layerDir} does not exist`),
  );
  const real = join(parent, basename(layerDir));
  for (const path of [layerDir, buildDirOf(layerDir)]) {
    if (!absent(path)) throw new FsError('EEXIST', `${path} exists`);
  }
  refuseOverlap(real, layerDir, o);
  const where = statSync(parent);
  const delta = statSync(o.deltaDir);
  if (!where.isDirectory()) throw new FsError('ENOTDIR', `${parent} is not a directory`);
  if (where.dev !== delta.dev) {
    throw new FsError('EXDEV', `${parent} is not on the delta's filesystem (${o.deltaDir})`);
  }
  return layerDir;
}
