// The base record: a codebase entry's identity when this sandbox first copied it up, deleted or added it.
import type { BigIntStats } from 'node:fs';

import type { DeltaEntryType } from './types.js';

/**
 * What the codebase held at a path when the sandbox first touched it. Bigints are decimal strings so the
 * record is plain JSON. Invariant: recorded once per path (first sight wins) and dropped only when the
 * path's change is committed, discarded or undone (an add removed again).
 */
export type BaseRecord =
  | { readonly exists: false }
  | {
      readonly exists: true;
      readonly type: DeltaEntryType;
      readonly size: string;
      readonly mtimeNs: string;
      readonly ctimeNs: string;
      readonly ino: string;
      readonly dev: string;
      readonly mode: number;
    };

/** "Did not exist": the base of an add. */
export const ABSENT: BaseRecord = { exists: false };

/** The entry type of an lstat result. */
export function typeOf(st: BigIntStats): DeltaEntryType {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'directory';
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isFIFO()) return 'fifo';
  return 'other';
}

/** The base record of a lower entry. */
export function baseOf(st: BigIntStats): BaseRecord {
  return {
    exists: true,
    type: typeOf(st),
    size: st.size.toString(),
    mtimeNs: st.mtimeNs.toString(),
    ctimeNs: st.ctimeNs.toString(),
    ino: st.ino.toString(),
    dev: st.dev.toString(),
    mode: Number(st.mode),
  };
}

/**
 * Why the codebase entry `now` no longer matches `base`, or null when it does. Directories compare by type
 * only: their times change whenever anyone adds a file, which is not a conflict.
 */
export function baseMismatch(base: BaseRecord, now: BigIntStats | null): string | null {
  if (!base.exists) {
    if (now === null) return null;
    return now.isDirectory() ? null : 'created in the codebase after the sandbox added it';
  }
  if (now === null) return 'deleted in the codebase since the sandbox first saw it';
  if (typeOf(now) !== base.type) return 'replaced in the codebase by a different kind of entry';
  if (base.type === 'directory') return null;
  const same =
    now.size.toString() === base.size &&
    now.mtimeNs.toString() === base.mtimeNs &&
    now.ctimeNs.toString() === base.ctimeNs &&
    now.ino.toString() === base.ino;
  return same ? null : 'changed in the codebase since the sandbox first saw it';
}
