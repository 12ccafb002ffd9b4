// One frozen layer (a checkpoint) seen through the layers below it: a read-only LowerLayer that resolves
// exactly as a delta does (upper wins, whiteouts before the layer below, opaque directories), by the same
// functions of context.ts on a view context { upper, meta, lower }.
import { constants, lstatSync, type BigIntStats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

import { FsError } from '../errors.js';
import { HostDir, type HostDirent } from '../host/host-dir.js';
import {
  mergedEntries,
  resolve,
  resolveIfCached,
  upperKnownAbsent,
  type LayerView,
  type LowerLayer,
} from './context.js';
import { readLayerMeta } from './journal.js';
import type { MetaState } from './meta-state.js';
import type { DeltaLookup } from './types.js';

/**
 * The empty file in a frozen layer's meta/ that says it is one (a checkpoint makes it: the layer's snapshot
 * and journal are the writable layer's as they were, and a delta that never compacted has no snapshot).
 * Layers made before it have a meta/snapshot.json instead.
 */
export const FROZEN_MARKER = 'frozen';

/** The metadata of the frozen layer at `dir`; EINVAL when it is no frozen layer. */
export async function readFrozenMeta(dir: string): Promise<MetaState> {
  const meta = await readLayerMeta(join(dir, 'meta'), FROZEN_MARKER);
  if (meta === null)
    throw new FsError(
      'EINVAL',
      `not a frozen layer (no meta/${FROZEN_MARKER} nor meta/snapshot.json): ${dir}`,
    );
  return meta;
}

/**
 * Throws EINVAL unless `dir` is a frozen layer, by its marker (or a snapshot, for older layers) alone: two
 * lstats, where reading its metadata replays its whole journal (~30 ms for 10,000 records). What a fork
 * checks of the layers it is made on; the first open of the fork reads them.
 */
export function checkFrozenLayer(dir: string): void {
  const meta = join(dir, 'meta');
  for (const name of [FROZEN_MARKER, 'snapshot.json']) {
    if (lstatSync(join(meta, name), { throwIfNoEntry: false })?.isFile() === true) return;
  }
  throw new FsError('EINVAL', `not a frozen layer (no meta/${FROZEN_MARKER} nor meta/snapshot.json): ${dir}`);
}

/** Flags that could change a file: refused, since a frozen layer is never written. */
const WRITING =
  constants.O_WRONLY | constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC | constants.O_APPEND;

/** An errno error as the host layer throws them (callers test `code`, isMissing included). */
function errnoError(code: string, rel: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`${code}: /${rel}`);
  err.code = code;
  return err;
}

/**
 * A frozen layer directory (`upper/` + `meta/snapshot.json`) over the next-lower layer. Immutable, so
 * its HostDir's absent-paths cache never goes stale. Fast paths answer undefined where a step would need
 * the thread pool; no directory fd is lent (withCachedDir), and link counts are never trusted.
 */
export class FrozenView implements LowerLayer {
  /** The layer directory, as given. */
  readonly dir: string;
  readonly nlinkCountsSubdirs = false;
  readonly #view: LayerView;

  private constructor(dir: string, view: LayerView) {
    this.dir = dir;
    this.#view = view;
  }

  /**
   * Opens the frozen layer at `dir` over `below`: its metadata loaded as a delta loads its own at open
   * (snapshot, journal replayed; read-only). Throws when `dir` is no frozen layer.
   */
  static async open(options: { dir: string; below: LowerLayer }): Promise<FrozenView> {
    const meta = await readFrozenMeta(options.dir);
    return FrozenView.fromState({ ...options, meta });
  }

  /**
   * The frozen layer at `dir` with the metadata `meta` it holds, already loaded: the state a checkpoint
   * has just frozen (the same records as its files), so a checkpoint reads nothing back. `meta` must never
   * change again. Its upper tree is opened synchronously (HostDir.openNow): a checkpoint has just renamed
   * it there, and a compaction has it open in the view this one replaces.
   */
  static fromState(options: { dir: string; meta: MetaState; below: LowerLayer }): FrozenView {
    const upper = HostDir.openNow({ path: join(options.dir, 'upper') });
    return new FrozenView(options.dir, { upper, meta: options.meta, lower: options.below });
  }

  /** Its upper tree and metadata over the view below (read-only: the change set of a stack, a flatten). */
  get layer(): LayerView {
    return this.#view;
  }

  async lstat(rel: string): Promise<BigIntStats> {
    const found = await resolve(this.#view, rel);
    if (found === null) throw errnoError('ENOENT', rel);
    return found.stat;
  }

  async lstatOrNull(rel: string): Promise<BigIntStats | null> {
    return (await resolve(this.#view, rel))?.stat ?? null;
  }

  lstatIfCached(rel: string): BigIntStats | null | undefined {
    const found = this.#resolveIfCachedQuietly(rel);
    return found === undefined || found === null ? found : found.stat;
  }

  async open(rel: string, flags: number): Promise<FileHandle> {
    if ((flags & WRITING) !== 0) throw errnoError('EROFS', rel);
    return this.#serving(await this.#mustResolve(rel), rel).open(rel, flags);
  }

  openSyncIfCached(rel: string, flags: number): number | undefined {
    if ((flags & WRITING) !== 0) return undefined;
    const found = this.#resolveIfCachedQuietly(rel);
    if (found === undefined || found === null) return undefined;
    return this.#serving(found, rel).openSyncIfCached(rel, flags);
  }

  async readlink(rel: string): Promise<string> {
    return this.#serving(await this.#mustResolve(rel), rel).readlink(rel);
  }

  /** The merged listing (unsorted); ENOENT/ENOTDIR as errno errors, as a host directory answers. */
  async readdir(rel: string): Promise<HostDirent[]> {
    let entries: Map<string, DeltaLookup['type']>;
    try {
      entries = await mergedEntries(this.#view, rel);
    } catch (err) {
      if (err instanceof FsError) throw errnoError(err.errnoName, rel);
      throw err;
    }
    return [...entries].map(([name, type]) => ({ name, type }));
  }

  /** No fd of a merged directory exists to lend: the callers (read-ahead) skip. */
  withCachedDir<T>(): Promise<T> | undefined {
    return undefined;
  }

  /** Caches the directory's fd in this layer (where it has it) and below, for the synchronous lookups. */
  cacheDirSync(rel: string): void {
    if (!upperKnownAbsent(this.#view, rel)) this.#view.upper.cacheDirSync(rel);
    this.#view.lower.cacheDirSync(rel);
  }

  async invalidateCache(): Promise<void> {
    await this.#view.upper.invalidateCache();
    await this.#view.lower.invalidateCache();
  }

  /** Closes this layer's own fds (the layers below are closed by their owner). */
  async close(): Promise<void> {
    await this.#view.upper.close();
  }

  async #mustResolve(rel: string): Promise<DeltaLookup> {
    const found = await resolve(this.#view, rel);
    if (found === null) throw errnoError('ENOENT', rel);
    return found;
  }

  /** resolveIfCached, with any error as "take the async path" (which reports it). */
  #resolveIfCachedQuietly(rel: string): DeltaLookup | null | undefined {
    try {
      return resolveIfCached(this.#view, rel);
    } catch {
      return undefined;
    }
  }

  /** The layer serving `found`: this one's upper tree, or the view below. */
  #serving(found: DeltaLookup, rel: string): Pick<LowerLayer, 'open' | 'openSyncIfCached' | 'readlink'> {
    if (rel === '' || found.layer === 'lower') return this.#view.lower;
    return this.#view.upper;
  }
}
