// Which directories the binding may answer LOOKUP misses in (fs/native-lookups.ts): those only the
// writable layer holds. Nothing of the codebase is at or below one (its base is an add, no whiteout below
// it, not hidden) and no frozen layer lies between, so a name its upper directory lacks is missing from the
// merged view, as long as the codebase still lacks the directory (the binding checks that at each answer).
import type { DeltaContext } from './context.js';
import { toRel } from './paths.js';
import { isAddedDir } from './records.js';

export interface FastDir {
  /** The writable layer's root: the binding opens `rel` beneath it, following no symlink. */
  readonly upperRootFd: number;
  readonly rel: string;
}

export function fastDirOf(ctx: DeltaContext, path: string): FastDir | null {
  if (ctx.lower !== ctx.codebase) return null; // frozen layers: their whiteouts and adds are not checked
  const rel = toRel(path);
  if (rel === '' || !isAddedDir(ctx, rel)) return null;
  return { upperRootFd: ctx.upper.rootFd, rel };
}
