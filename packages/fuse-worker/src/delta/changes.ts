// The change set of a delta, derived from the upper tree plus the whiteouts.
import type { ChangeEntry } from '@agentfense/protocol';

import type { BigIntStats } from 'node:fs';

import type { HostDir } from '../host/host-dir.js';
import { walkTree } from '../host/walk.js';
import { Yielder } from '../host/yielder.js';
import type { DeltaContext } from './context.js';
import { typeOf, type BaseRecord } from './identity.js';
import type { MetaState } from './meta-state.js';
import { toCodebase } from './paths.js';
import type { DeltaEntryType } from './types.js';

/** One change with what commit and diff need beyond the public entry. */
export interface DeltaChange {
  readonly rel: string;
  readonly entry: ChangeEntry;
  /** Type of the upper entry; null for a deletion. */
  readonly upperType: DeltaEntryType | null;
  /** The codebase entry's identity when the sandbox first touched the path (undefined: never recorded). */
  readonly base: BaseRecord | undefined;
  /**
   * The frozen layer's upper tree holding the entry, when a frozen layer serves it (the change set of a
   * stack); absent: the writable layer's.
   */
  readonly from?: HostDir;
}

/**
 * What a change set is computed from: a delta's writable layer, or the net state of a stack of layers
 * (stack-changes.ts), in the same terms.
 */
export interface ChangeSource {
  /** Whiteouts and the base of each path (first sight of the codebase). */
  readonly meta: Pick<MetaState, 'base' | 'isHidden' | 'whiteoutPaths'>;
  readonly codebase: HostDir;
  /** The writable layer's upper tree. */
  readonly upper: HostDir;
  /**
   * Calls `found` for every upper entry, parents first, with the frozen layer's upper tree holding it
   * (undefined: the writable layer's).
   */
  entries(found: (st: BigIntStats, rel: string, from: HostDir | undefined) => void): Promise<void>;
  /** Whether an upper entry is at `rel` (a whiteout under one is a replacement, not a deletion). */
  hasUpper(rel: string): Promise<boolean>;
}

/**
 * Lists every change, sorted by path. An upper entry is 'added' when its base says the codebase had
 * nothing there and 'modified' when it had something; upper directories without a base are structure
 * (copies of codebase directories made to hold a child) and are not changes themselves. A whiteout with
 * no upper entry is a deletion. Cost: one readdir per upper directory and one lstat per upper entry.
 */
export function computeChanges(ctx: DeltaContext): Promise<DeltaChange[]> {
  const upper = ctx.upper;
  return collectChanges({
    meta: ctx.meta,
    codebase: ctx.codebase,
    upper,
    // Directory fds all the way down: any depth, any name length, and the event loop keeps turning.
    entries: (found) => walkTree(upper.path, { onEntry: (st, walked) => found(st, walked, undefined) }),
    hasUpper: async (rel) => (await upper.lstatOrNull(rel)) !== null,
  });
}

/** The change set of `source`, sorted by path (computeChanges). */
export async function collectChanges(source: ChangeSource): Promise<DeltaChange[]> {
  const { meta } = source;
  const changes: DeltaChange[] = [];
  // No base for a non-directory only after a crash between a copy and its record: ask the codebase later.
  const unknown: { paths: PathPair; st: BigIntStats; type: DeltaEntryType; from: HostDir | undefined }[] = [];
  const push = (
    { path, rel }: PathPair,
    st: BigIntStats,
    type: DeltaEntryType,
    existed: BigIntStats | BaseRecord | null,
    from: HostDir | undefined,
    base?: BaseRecord,
  ): void => {
    const oldMode = existed === null ? undefined : permissionBits(existed);
    changes.push({
      rel,
      entry: {
        path,
        kind: existed !== null ? 'modified' : 'added',
        type: publicType(type),
        size: type === 'directory' ? null : Number(st.size),
        // What a review must show because commit writes it: the mode (set-id bits never: commit.ts).
        ...(type === 'symlink' ? {} : { mode: Number(st.mode) & 0o7777 & ~SET_ID }),
        ...(oldMode === undefined ? {} : { oldMode }),
      },
      upperType: type,
      base,
      ...(from === undefined ? {} : { from }),
    });
  };
  await source.entries((st, walked, from) => {
    const type = typeOf(st);
    // Looked up through the flat copy: a lookup would flatten the walk's own path, which its stack keeps.
    const paths = pathPair(walked);
    const base = meta.base(paths.rel);
    if (base !== undefined) push(paths, st, type, base.exists ? base : null, from, base);
    else if (type !== 'directory') unknown.push({ paths, st, type, from });
  });
  const yielder = new Yielder();
  for (const { paths, st, type, from } of unknown) {
    await yielder.maybe();
    const existed = meta.isHidden(paths.rel) ? null : await source.codebase.lstatOrNull(paths.rel);
    push(paths, st, type, existed, from);
  }
  for (const rel of meta.whiteoutPaths()) {
    await yielder.maybe();
    const base = meta.base(rel);
    // Over nothing the codebase had (an add undone in a later layer of a stack): no change at all.
    if (base?.exists === false) continue;
    // A whiteout under an upper entry is a replacement, listed with that entry.
    if (await source.hasUpper(rel)) continue;
    const type = base?.exists === true ? publicType(base.type) : 'other';
    changes.push({
      rel,
      entry: { path: toCodebase(rel), kind: 'deleted', type, size: null },
      upperType: null,
      base,
    });
  }
  // The link target a commit writes: one readlink per symlink change.
  for (const [i, change] of changes.entries()) {
    if (change.upperType !== 'symlink') continue;
    await yielder.maybe();
    const target = await (change.from ?? source.upper).readlink(change.rel);
    changes[i] = { ...change, entry: { ...change.entry, target } };
  }
  return changes.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
}

/** A change's codebase path ('/a/b') and layer path ('a/b'). */
interface PathPair {
  readonly path: string;
  readonly rel: string;
}

/**
 * The change's codebase path as one flat string, and its layer path as a view into it. The walk's paths
 * are chains of concatenations sharing their parents; a set, a lookup or the answer's encoding makes each
 * a flat copy, and a path and its `/`-prefixed twin made two (three with the copy a lookup left in the
 * walk's stack): ~184 MB each for 1,200 nested 255-character names, in a worker whose memory is bounded.
 * One copy, shared by both names.
 */
function pathPair(rel: string): PathPair {
  const path = toCodebase(rel);
  // charCodeAt flattens a concatenation in place; a slice of 13+ characters is then a view, not a copy.
  path.charCodeAt(0);
  return { path, rel: path.slice(1) };
}

/** Set-uid and set-gid: shown and committed without them. */
const SET_ID = 0o6000;

/** The permission bits of a codebase entry (its lstat now, or its base record); none for symlinks. */
function permissionBits(entry: BigIntStats | BaseRecord): number | undefined {
  if ('exists' in entry) return entry.exists && entry.type !== 'symlink' ? entry.mode & 0o7777 : undefined;
  return entry.isSymbolicLink() ? undefined : Number(entry.mode) & 0o7777;
}

function publicType(type: DeltaEntryType): ChangeEntry['type'] {
  return type === 'fifo' ? 'other' : type;
}
