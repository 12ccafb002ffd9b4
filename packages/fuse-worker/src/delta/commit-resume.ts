// Finishing an unfinished commit (roll forward): what a change the interrupted commit listed and the delta
// still holds may have left in the codebase. A change leaves the delta only after it is in the codebase
// (commit.ts), so such a change was not started, was half done (a temporary file written, or the old
// entry removed before its replacement was renamed in), or was done and not yet forgotten. Each case is
// told from the codebase alone, so re-applying is idempotent and needs no record per file.
import type { BigIntStats } from 'node:fs';
import { constants } from 'node:fs';

import type { FileHandle } from 'node:fs/promises';

import { relBase, relJoin, relParent } from '../host/rel-path.js';
import type { Yielder } from '../host/yielder.js';
import type { DeltaChange } from './changes.js';
import type { DeltaContext } from './context.js';
import { typeOf } from './identity.js';

/** S_ISUID | S_ISGID: never written to the codebase. */
export const SET_ID = 0o6000;

/** Longest name kept in a commit's temporary name: with `.` + `.af-commit-<16 hex>` it fits NAME_MAX. */
const MAX_NAME_IN_TEMP = 200;

/**
 * The temporary name commit `id` copies a file to before renaming it over `name`: `.<name>.af-commit-<id>`,
 * so a leftover says whose it was, or `.af-commit-<id>` for a name too long to fit in 255 bytes with it.
 * Fixed per commit and name, so a retry of the same commit finds (and removes) what a crash left.
 */
export function commitTempName(name: string, id: string): string {
  const prefix = Buffer.byteLength(name) <= MAX_NAME_IN_TEMP ? `.${name}.af-commit` : '.af-commit';
  return `${prefix}-${id}`;
}

/** The temporary path of change `rel` in commit `id`. */
export function commitTempPath(rel: string, id: string): string {
  return relJoin(relParent(rel), commitTempName(relBase(rel), id));
}

/**
 * Removes the temporary files commit `id` may have left next to the changes at `rels` (a crash between
 * writing one and renaming it in). Only names carrying this commit's id are touched.
 */
export async function removeLeftoverTemps(
  ctx: DeltaContext,
  rels: readonly string[],
  id: string,
  yielder: Yielder,
): Promise<void> {
  for (const rel of rels) {
    await yielder.maybe();
    await ctx.codebase.unlink(commitTempPath(rel, id)).catch((err: NodeJS.ErrnoException) => {
      // Not there (the usual case), or its directory is gone or no directory: nothing of ours to remove.
      if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR' && err.code !== 'ELOOP' && err.code !== 'EISDIR')
        throw err;
    });
  }
}

/**
 * Gives up the unfinished commit, if any (the whole delta is being discarded): its temporary files go, and
 * what it applied stays in the codebase.
 */
export async function abandonUnfinishedCommit(ctx: DeltaContext, yielder: Yielder): Promise<void> {
  const unfinished = await ctx.commits.pending();
  if (unfinished === null) return;
  await removeLeftoverTemps(ctx, unfinished.paths, unfinished.id, yielder);
  await ctx.commits.finish();
}

/**
 * What to do with a change of an unfinished commit whose codebase entry `now` no longer matches its base
 * record: 'done' when the codebase already holds exactly what the commit writes (applied, not yet
 * forgotten), 'redo' when the entry is gone while the sandbox has one there (the commit removed the old
 * entry to put its own in place and stopped), 'conflict' otherwise (someone else changed it).
 */
export async function inDoubtVerdict(
  ctx: DeltaContext,
  change: DeltaChange,
  now: BigIntStats | null,
): Promise<'done' | 'redo' | 'conflict'> {
  if (change.upperType === null) return now === null ? 'done' : 'conflict';
  if (now === null) return 'redo';
  const up = await ctx.upper.lstat(change.rel);
  if (typeOf(now) !== change.upperType) return 'conflict';
  const sameMode = (Number(now.mode) & 0o7777) === (Number(up.mode) & 0o7777 & ~SET_ID);
  switch (change.upperType) {
    case 'directory':
      return sameMode ? 'done' : 'conflict';
    case 'symlink':
      return (await ctx.codebase.readlink(change.rel)) === (await ctx.upper.readlink(change.rel))
        ? 'done'
        : 'conflict';
    case 'file':
      // The commit sets the exact mtime of the sandbox's file: with size and mode a strong sign, and the
      // bytes are compared to be sure.
      return sameMode &&
        now.size === up.size &&
        now.mtimeNs === up.mtimeNs &&
        (await sameBytes(ctx, change.rel))
        ? 'done'
        : 'conflict';
    default:
      return 'conflict';
  }
}

const CHUNK = 64 * 1024;

/** True when the codebase file and the sandbox's file at `rel` hold the same bytes. */
async function sameBytes(ctx: DeltaContext, rel: string): Promise<boolean> {
  const lower = await ctx.codebase.open(rel, constants.O_RDONLY);
  try {
    const upper = await ctx.upper.open(rel, constants.O_RDONLY);
    try {
      return await compareHandles(lower, upper);
    } finally {
      await upper.close();
    }
  } finally {
    await lower.close();
  }
}

async function compareHandles(a: FileHandle, b: FileHandle): Promise<boolean> {
  const left = Buffer.allocUnsafe(CHUNK);
  const right = Buffer.allocUnsafe(CHUNK);
  for (let position = 0; ; position += CHUNK) {
    const [x, y] = await Promise.all([a.read(left, 0, CHUNK, position), b.read(right, 0, CHUNK, position)]);
    if (x.bytesRead !== y.bytesRead) return false;
    if (x.bytesRead === 0) return true;
    if (!left.subarray(0, x.bytesRead).equals(right.subarray(0, y.bytesRead))) return false;
  }
}
