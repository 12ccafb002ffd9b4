// The view below a writable layer that stands on frozen layers: the newest frozen layer over the older ones
// and the codebase, with a location cache. Frozen layers never change, so which of them serves a path
// (or that one of them hides it) is fixed for a given stack: remembered, a lookup through 8 layers is one
// probe of the serving layer instead of one per layer. The codebase is never remembered as holding or
// lacking a path (a commit changes it): "no frozen layer has it nor hides it" sends the probe there.
import { constants, type BigIntStats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

import type { HostDir, HostDirent } from '../host/host-dir.js';
import { upperStat, upperStatIfCached, type LowerLayer } from './context.js';
import type { FrozenView } from './frozen-view.js';

/** Where a path resolves in a stack: the index (oldest 0) of the frozen layer serving it, or one of these. */
export const CODEBASE = -1;
export const HIDDEN = -2;

/** Paths remembered per stack; the oldest are forgotten first once it is full (a few hundred KB at most). */
export const LOCATION_CACHE_SIZE = 8192;

/**
 * A bounded map from path to location, for one stack (a new stack gets a new one, so an entry never
 * outlives the layers it describes). Insertion order is age: the oldest entry goes when full.
 */
export class LocationCache {
  readonly #entries = new Map<string, number>();
  readonly #size: number;

  constructor(size = LOCATION_CACHE_SIZE) {
    this.#size = size;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(rel: string): number | undefined {
    return this.#entries.get(rel);
  }

  set(rel: string, where: number): void {
    if (this.#entries.size >= this.#size && !this.#entries.has(rel)) {
      const oldest = this.#entries.keys().next();
      if (oldest.done !== true) this.#entries.delete(oldest.value);
    }
    this.#entries.set(rel, where);
  }

  clear(): void {
    this.#entries.clear();
  }
}

/** An errno error as the host layer throws them (callers test `code`, isMissing included). */
function errnoError(code: string, rel: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`${code}: /${rel}`);
  err.code = code;
  return err;
}

/**
 * The frozen layers `views` (oldest first, each over the one before it, the oldest over `codebase`) as
 * one read-only LowerLayer. Resolves a path as the chain of FrozenViews does (upper entry wins, an upper
 * ancestor that is no directory or a whiteout hides everything below), newest layer first.
 */
export class StackView implements LowerLayer {
  readonly nlinkCountsSubdirs = false;
  readonly #views: readonly FrozenView[];
  readonly #codebase: HostDir;
  readonly #top: FrozenView;
  readonly #cache: LocationCache;

  constructor(o: { views: readonly FrozenView[]; codebase: HostDir; cacheSize?: number }) {
    const top = o.views.at(-1);
    if (top === undefined) throw new Error('a stack view needs at least one frozen layer');
    this.#views = o.views;
    this.#codebase = o.codebase;
    this.#top = top;
    this.#cache = new LocationCache(o.cacheSize);
  }

  /** How many paths are remembered (tests). */
  get cachedPaths(): number {
    return this.#cache.size;
  }

  /** Where `rel` resolves: one probe per layer the first time, none after. */
  async locate(rel: string): Promise<number> {
    if (rel === '') return CODEBASE; // the root is the codebase's in every layer
    const known = this.#cache.get(rel);
    if (known !== undefined) return known;
    let where = CODEBASE;
    for (let i = this.#views.length - 1; i >= 0; i--) {
      const layer = (this.#views[i] as FrozenView).layer;
      const up = await upperStat(layer, rel);
      if (up === 'blocked') where = HIDDEN;
      else if (up !== 'missing') where = i;
      else if (layer.meta.isHidden(rel)) where = HIDDEN;
      else continue;
      break;
    }
    this.#cache.set(rel, where);
    return where;
  }

  /** locate() without a promise; undefined where a layer would need a thread-pool trip. */
  locateIfCached(rel: string): number | undefined {
    if (rel === '') return CODEBASE;
    const known = this.#cache.get(rel);
    if (known !== undefined) return known;
    for (let i = this.#views.length - 1; i >= 0; i--) {
      const layer = (this.#views[i] as FrozenView).layer;
      const up = upperStatIfCached(layer, rel);
      if (up === undefined) return undefined;
      let where: number;
      if (up !== 'missing') where = i;
      else if (layer.meta.isHidden(rel)) where = HIDDEN;
      else continue;
      this.#cache.set(rel, where);
      return where;
    }
    this.#cache.set(rel, CODEBASE);
    return CODEBASE;
  }

  /** The host tree holding `rel` at `where` (not HIDDEN). */
  #host(where: number): HostDir {
    return where === CODEBASE ? this.#codebase : (this.#views[where] as FrozenView).layer.upper;
  }

  async lstat(rel: string): Promise<BigIntStats> {
    const where = await this.locate(rel);
    if (where === HIDDEN) throw errnoError('ENOENT', rel);
    return this.#host(where).lstat(rel);
  }

  async lstatOrNull(rel: string): Promise<BigIntStats | null> {
    const where = await this.locate(rel);
    return where === HIDDEN ? null : this.#host(where).lstatOrNull(rel);
  }

  lstatIfCached(rel: string): BigIntStats | null | undefined {
    if (rel === '') return undefined;
    const where = this.locateIfCached(rel);
    if (where === undefined || where === HIDDEN) return where === HIDDEN ? null : undefined;
    return this.#host(where).lstatIfCached(rel);
  }

  async open(rel: string, flags: number): Promise<FileHandle> {
    if (isWriting(flags)) throw errnoError('EROFS', rel); // a frozen layer is never written
    const where = await this.locate(rel);
    if (where === HIDDEN) throw errnoError('ENOENT', rel);
    return this.#host(where).open(rel, flags);
  }

  openSyncIfCached(rel: string, flags: number): number | undefined {
    if (isWriting(flags) || rel === '') return undefined;
    const where = this.locateIfCached(rel);
    if (where === undefined || where === HIDDEN) return undefined;
    return this.#host(where).openSyncIfCached(rel, flags);
  }

  async readlink(rel: string): Promise<string> {
    const where = await this.locate(rel);
    if (where === HIDDEN) throw errnoError('ENOENT', rel);
    return this.#host(where).readlink(rel);
  }

  /** The merged listing, as the top frozen layer gives it. */
  readdir(rel: string): Promise<HostDirent[]> {
    return this.#top.readdir(rel);
  }

  /** No fd of a merged directory exists to lend: the callers (read-ahead) skip. */
  withCachedDir<T>(): Promise<T> | undefined {
    return undefined;
  }

  cacheDirSync(rel: string): void {
    this.#top.cacheDirSync(rel);
  }

  async invalidateCache(): Promise<void> {
    this.#cache.clear();
    await this.#top.invalidateCache();
  }

  /** The frozen layers are closed by their owner (layer-switch.ts); the cache goes with this object. */
  async close(): Promise<void> {
    this.#cache.clear();
    await Promise.resolve();
  }
}

/** Flags that could change a file: refused, since a frozen layer is never written. */
const WRITING =
  constants.O_WRONLY | constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC | constants.O_APPEND;

function isWriting(flags: number): boolean {
  return (flags & WRITING) !== 0;
}
