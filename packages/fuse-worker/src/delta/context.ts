// The state every delta operation works on, and the merged-view resolution they share.
import type { BigIntStats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

import { FsError } from '../errors.js';
import type { HostDir, HostDirent } from '../host/host-dir.js';
import { isMissing } from '../host/host-dir.js';
import { randomHex } from '../host/random-hex.js';
import { relBase, relParent } from '../host/rel-path.js';
import type { CommitJournal } from './commit-journal.js';
import type { MetaJournal } from './journal.js';
import type { MetaState } from './meta-state.js';
import { entryBytes, type DiskQuota } from './quota.js';
import { typeOf } from './identity.js';
import type { DeltaLogger, DeltaLookup } from './types.js';

/**
 * What the delta asks of the layer below its writable one: the codebase itself (a HostDir) or a frozen
 * layer over it (frozen-view.ts). Read-only. The synchronous fast paths may answer undefined ("take the
 * async path") where an exact answer would cost, never a wrong one.
 */
export interface LowerLayer {
  lstat(rel: string): Promise<BigIntStats>;
  lstatOrNull(rel: string): Promise<BigIntStats | null>;
  lstatIfCached(rel: string): BigIntStats | null | undefined;
  /** Read-only flags only. */
  open(rel: string, flags: number): Promise<FileHandle>;
  openSyncIfCached(rel: string, flags: number): number | undefined;
  readlink(rel: string): Promise<string>;
  readdir(rel: string): Promise<HostDirent[]>;
  /** undefined: no directory fd to lend (the read-ahead then skips). */
  withCachedDir<T>(rel: string, use: (dirFd: number) => Promise<T>): Promise<T> | undefined;
  cacheDirSync(rel: string): void;
  /** Whether a directory's st_nlink of 2 means it has no subdirectory (see DirTree). */
  readonly nlinkCountsSubdirs: boolean;
  invalidateCache(): Promise<void>;
  close(): Promise<void>;
}

/** The layers, the metadata and the logger of one open delta. */
export interface DeltaContext {
  /**
   * The merged view below the writable layer: the newest frozen layer (over the older ones and the
   * codebase), or the codebase itself (the same object as `codebase`) when there is no frozen layer.
   */
  readonly lower: LowerLayer;
  /** The codebase. Invariant: changed only by commit. */
  readonly codebase: HostDir;
  /** New and changed entries, mirroring codebase paths. Holds no metadata of any kind. */
  readonly upper: HostDir;
  /** Scratch space on the upper's filesystem: copy-ups are built here and renamed into place. */
  readonly work: HostDir;
  readonly meta: MetaState;
  readonly journal: MetaJournal;
  /** The intent record of an unfinished commit (commit-journal.ts). */
  readonly commits: CommitJournal;
  readonly logger: DeltaLogger;
  /** The disk quota on the upper layer, when the sandbox has one. */
  readonly quota: DiskQuota | null;
  /**
   * Owner given to upper copies of codebase entries (copy-up, directories made to hold a child): the owner
   * the FUSE layer shows for codebase entries, so a copy-up never changes who owns a file. Null: left as
   * the worker made them (its own uid).
   */
  readonly owner: { readonly uid: number; readonly gid: number } | null;
}

/**
 * What the merged-view resolution needs: a writable layer over the view below it, or a frozen layer over
 * the view below it (frozen-view.ts), which resolves the same way.
 */
export type LayerView = Pick<DeltaContext, 'upper' | 'lower' | 'meta'>;

/** A name no concurrent operation will pick. */
export function tempName(prefix: string): string {
  return `${prefix}-${process.pid}-${randomHex(8)}`;
}

/** Bound on remembered absent upper paths (a few MB at most); cleared, not evicted, when reached. */
const MAX_ABSENT = 20_000;

/**
 * Upper-layer paths known to be absent (ENOENT), valid for one generation of the upper HostDir. The
 * upper layer is empty for most of a codebase, so without this every lookup and getattr would pay a
 * failing upper lstat before the lower one. An absent directory covers everything below it, so a cold
 * walk of an untouched tree records one entry per top-level name, not one per file.
 */
interface AbsentSet {
  generation: number;
  readonly paths: Set<string>;
}
const absentByUpper = new WeakMap<HostDir, AbsentSet>();

function absentSet(upper: HostDir): AbsentSet {
  let set = absentByUpper.get(upper);
  if (set === undefined) {
    set = { generation: upper.generation, paths: new Set() };
    absentByUpper.set(upper, set);
  } else if (set.generation !== upper.generation) {
    // Some name was added, removed or moved in the upper layer since: forget everything.
    set.paths.clear();
    set.generation = upper.generation;
  }
  return set;
}

/**
 * Only paths up to this long are remembered and only ancestors up to it are checked: a cache may say "do
 * not know", and hashing every prefix of a path 3000 levels deep would cost O(depth x length) per lookup.
 */
const MAX_ABSENT_PATH = 1024;

/** True when `rel` or one of its ancestors is known to be absent from the upper layer. */
function knownAbsent(set: AbsentSet, rel: string): boolean {
  const paths = set.paths;
  if (paths.size === 0) return false;
  for (let i = rel.indexOf('/'); i >= 0 && i <= MAX_ABSENT_PATH; i = rel.indexOf('/', i + 1)) {
    if (paths.has(rel.slice(0, i))) return true;
  }
  return rel.length <= MAX_ABSENT_PATH && paths.has(rel);
}

/**
 * Records `rel` as absent from the upper layer, unless an upper namespace change started or finished since
 * `generation` was read (before the lstat that found it missing).
 */
function rememberAbsent(upper: HostDir, generation: number, rel: string): void {
  const set = absentSet(upper);
  if (upper.generation !== generation || set.generation !== generation || rel.length > MAX_ABSENT_PATH)
    return;
  if (set.paths.size >= MAX_ABSENT) set.paths.clear();
  set.paths.add(rel);
}

/** True when `rel` is known, without a syscall, to be absent from the upper layer (see AbsentSet). */
export function upperKnownAbsent(ctx: LayerView, rel: string): boolean {
  return knownAbsent(absentSet(ctx.upper), rel);
}

/**
 * lstat in the upper layer. 'missing' (ENOENT) means "ask the lower layer"; 'blocked' (ENOTDIR/ELOOP)
 * means an upper ancestor is not a directory, which hides the whole lower subtree too.
 * Answers 'missing' without a syscall when the path is known absent (see AbsentSet): an absence is
 * recorded only if no upper namespace change started or finished while the lstat ran.
 */
export async function upperStat(ctx: LayerView, rel: string): Promise<BigIntStats | 'missing' | 'blocked'> {
  const upper = ctx.upper;
  if (knownAbsent(absentSet(upper), rel)) return 'missing';
  const generation = upper.generation;
  try {
    return await upper.lstat(rel);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      rememberAbsent(upper, generation, rel);
      return 'missing';
    }
    if (code === 'ENOTDIR' || code === 'ELOOP') return 'blocked';
    throw err;
  }
}

/**
 * upperStat() without a promise: undefined where it would need a thread-pool trip. With the parent's fd
 * cached (a directory, so every ancestor is one) a missing name is ENOENT, never ENOTDIR: no 'blocked'.
 */
export function upperStatIfCached(ctx: LayerView, rel: string): BigIntStats | 'missing' | undefined {
  const upper = ctx.upper;
  if (knownAbsent(absentSet(upper), rel)) return 'missing';
  const generation = upper.generation;
  const up = upper.lstatIfCached(rel);
  if (up === undefined) return undefined;
  if (up !== null) return up;
  rememberAbsent(upper, generation, rel);
  return 'missing';
}

/** lstat of the lower entry if it is visible in the merged view (not whited out), else null. */
export async function visibleLowerStat(ctx: LayerView, rel: string): Promise<BigIntStats | null> {
  // Invariant: whiteouts are checked before the lower layer is asked.
  if (ctx.meta.isHidden(rel)) return null;
  return ctx.lower.lstatOrNull(rel);
}

/**
 * resolve() without a promise, where no step needs a thread-pool trip: the upper layer known absent (no
 * syscall) or its parent's fd cached, and then, if the upper layer has nothing there, the lower parent's fd
 * cached. The same answer resolve gives, in the same order (upper wins, whiteouts before the lower layer);
 * undefined when a step would need the pool (the caller then calls resolve). With a cached upper parent,
 * which is a directory, an lstat of one name cannot meet ENOTDIR/ELOOP: "missing" is ENOENT.
 */
export function resolveIfCached(ctx: LayerView, rel: string): DeltaLookup | null | undefined {
  if (rel === '') return undefined;
  const upper = ctx.upper;
  const set = absentSet(upper);
  if (!knownAbsent(set, rel)) {
    const generation = upper.generation;
    const up = upper.lstatIfCached(rel);
    if (up === undefined) return undefined;
    if (up !== null) return upperEntry(ctx, rel, up);
    rememberAbsent(upper, generation, rel);
  }
  if (ctx.meta.isHidden(rel)) return null;
  const lo = ctx.lower.lstatIfCached(rel);
  if (lo === undefined || lo === null) return lo;
  return { layer: 'lower', stat: lo, type: typeOf(lo), upper: null, lower: { dev: lo.dev, ino: lo.ino } };
}

/** The merged entry for an upper-layer stat at `rel`: the codebase identity it replaced, if any. */
function upperEntry(ctx: LayerView, rel: string, up: BigIntStats): DeltaLookup {
  const base = ctx.meta.base(rel);
  const lower = base?.exists === true ? { dev: BigInt(base.dev), ino: BigInt(base.ino) } : null;
  return { layer: 'upper', stat: up, type: typeOf(up), upper: { dev: up.dev, ino: up.ino }, lower };
}

/**
 * The merged view at `rel`. Order: upper entry wins over lower; whiteouts checked before lower.
 * Cost: one upper lstat, then (only on a miss) O(depth) Set lookups and one lower lstat.
 */
export async function resolve(ctx: LayerView, rel: string): Promise<DeltaLookup | null> {
  if (rel === '') {
    const stat = await ctx.lower.lstat('');
    return { layer: 'lower', stat, type: 'directory', upper: null, lower: { dev: stat.dev, ino: stat.ino } };
  }
  const up = await upperStat(ctx, rel);
  if (up === 'blocked') return null;
  if (up !== 'missing') return upperEntry(ctx, rel, up);
  const lo = await visibleLowerStat(ctx, rel);
  if (lo === null) return null;
  return { layer: 'lower', stat: lo, type: typeOf(lo), upper: null, lower: { dev: lo.dev, ino: lo.ino } };
}

/** The merged entry at `rel`, or ENOENT. */
export async function mustResolve(ctx: LayerView, rel: string): Promise<DeltaLookup> {
  const found = await resolve(ctx, rel);
  if (found === null) throw new FsError('ENOENT', `/${rel}`);
  return found;
}

/** Throws ENOENT/ENOTDIR unless the merged entry at `rel` is a directory. */
export async function requireDir(ctx: LayerView, rel: string): Promise<void> {
  const found = await mustResolve(ctx, rel);
  if (found.type !== 'directory') throw new FsError('ENOTDIR', `/${rel}`);
}

/** Names of the merged directory `rel` with their types: upper entries, then visible lower ones. */
export async function mergedEntries(ctx: LayerView, rel: string): Promise<Map<string, DeltaLookup['type']>> {
  const found = await mustResolve(ctx, rel);
  if (found.type !== 'directory') throw new FsError('ENOTDIR', `/${rel}`);
  const entries = new Map<string, DeltaLookup['type']>();
  // The root exists in both layers (resolve reports the codebase's attributes for it).
  if (found.layer === 'upper' || rel === '') {
    for (const e of await ctx.upper.readdir(rel)) entries.set(e.name, e.type);
  }
  // An opaque directory (upper dir on a whiteout) shows nothing from below.
  if (rel === '' || !ctx.meta.isHidden(rel)) {
    let lower: HostDirent[] = [];
    try {
      lower = await ctx.lower.readdir(rel);
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
    const whitedOut = ctx.meta.whiteoutsIn(rel);
    for (const e of lower) {
      // Upper entry wins over lower; a whited-out lower entry is gone.
      if (!entries.has(e.name) && !whitedOut.has(e.name)) entries.set(e.name, e.type);
    }
  }
  return entries;
}

/**
 * Whether the merged directory `rel` has no entry at all (rmdir, rename over a directory): the upper
 * layer's first entry answers at once (one getdents, not a listing, and synchronous where the directory's
 * fd is cached); the lower layer is listed only when the upper one is empty, since its entries may all be
 * whited out.
 */
export async function mergedIsEmpty(ctx: LayerView, rel: string): Promise<boolean> {
  const found = await mustResolve(ctx, rel);
  if (found.type !== 'directory') throw new FsError('ENOTDIR', `/${rel}`);
  if ((found.layer === 'upper' || rel === '') && (await ctx.upper.hasEntries(rel))) return false;
  if (rel !== '' && ctx.meta.isHidden(rel)) return true;
  // Nothing there in the codebase, known without the pool (a directory the sandbox made, as every one
  // `rm -r` removes after `tar -x`): no listing to wait for.
  if (rel !== '' && ctx.lower.lstatIfCached(rel) === null) return true;
  let lower: HostDirent[] = [];
  try {
    lower = await ctx.lower.readdir(rel);
  } catch (err) {
    if (!isMissing(err)) throw err;
  }
  const gone = ctx.meta.whiteoutsIn(rel);
  return lower.every((e) => gone.has(e.name));
}

/**
 * Makes sure directory `rel` exists in the upper layer, creating it (and its parents) as copies of the
 * merged directories' lower versions: same mode and times, no base record (they are structure, not changes).
 */
export async function ensureUpperDir(ctx: DeltaContext, rel: string): Promise<void> {
  if (rel === '') return;
  const up = await upperStat(ctx, rel);
  if (up !== 'missing') {
    if (up === 'blocked' || !up.isDirectory()) throw new FsError('ENOTDIR', `/${rel}`);
    return;
  }
  await ensureUpperDir(ctx, relParent(rel));
  const lo = await visibleLowerStat(ctx, rel);
  if (lo === null) throw new FsError('ENOENT', `/${rel}`);
  if (!lo.isDirectory()) throw new FsError('ENOTDIR', `/${rel}`);
  await chargeNew(ctx, rel, 0, () => ctx.upper.mkdir(rel, 0o700));
  if (ctx.owner !== null) await ctx.upper.lchown(rel, ctx.owner.uid, ctx.owner.gid);
  await ctx.upper.chmod(rel, Number(lo.mode));
  await ctx.upper.utimes(rel, lo.atimeNs, lo.mtimeNs);
}

/**
 * Runs `make`, which creates the upper entry `rel` expected to cost `bytes`, within the disk quota:
 * ENOSPC before anything is created when it does not fit, the real cost recorded after.
 */
export async function chargeNew(
  ctx: DeltaContext,
  rel: string,
  bytes: number,
  make: () => Promise<void>,
): Promise<void> {
  const quota = ctx.quota;
  if (quota === null) return make();
  await quota.whenReady();
  quota.check(null, bytes, `/${rel}`);
  await make();
  const st = await ctx.upper.lstatOrNull(rel);
  if (st !== null) quota.record(st);
  await chargeDir(ctx, relParent(rel));
}

/**
 * A name was added in upper directory `dirRel`: the directory costs what it holds now (its blocks grow
 * with its entries: 20,000 hard links are 20,000 names, and the directory keeps its size when they go).
 */
export async function chargeDir(ctx: DeltaContext, dirRel: string): Promise<void> {
  if (ctx.quota === null) return;
  const st = ctx.upper.lstatIfCached(dirRel) ?? (await ctx.upper.lstatOrNull(dirRel));
  if (st !== null) ctx.quota.record(st);
}

/** Throws ENOSPC unless the name of `rel` fits in its directory within the quota (before a link or rename). */
export async function checkName(ctx: DeltaContext, rel: string): Promise<void> {
  if (ctx.quota === null) return;
  await ctx.quota.whenReady();
  ctx.quota.checkGrowth(entryBytes(relBase(rel)), `/${rel}`);
}

/** The upper entry at `rel` is about to lose a name: when it was the last one, it costs nothing more. */
export async function releaseUpper(ctx: DeltaContext, rel: string): Promise<void> {
  if (ctx.quota === null) return;
  const st = await ctx.upper.lstatOrNull(rel);
  if (st !== null && (st.isDirectory() || st.nlink <= 1n)) ctx.quota.release(st.ino);
}
