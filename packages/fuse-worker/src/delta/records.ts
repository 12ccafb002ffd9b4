// The metadata side of namespace changes: which base/whiteout/unbase records a create or a removal
// journals, and the questions they ask of the merged view ("did the codebase have this path?").
// Invariant: records are journaled before the upper tree changes, so a crash in between leaves the entry
// visible (upper wins), never a lost whiteout.
import { FsError } from '../errors.js';
import { relParent } from '../host/rel-path.js';
import { ensureUpperDir, releaseUpper, requireDir, resolve, type DeltaContext } from './context.js';
import { ABSENT, baseOf, type BaseRecord } from './identity.js';
import type { MetaRecord } from './meta-state.js';
import { toRel } from './paths.js';
import type { DeltaLookup } from './types.js';

/** Journals records and applies them to the in-memory index (journal.ts). */
export function record(ctx: DeltaContext, records: readonly MetaRecord[]): Promise<void> {
  try {
    ctx.journal.record(records);
    return Promise.resolve();
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

/** Validates a create at `path`: nothing there (EEXIST), parent a directory; records the base of the add. */
export async function prepareCreate(ctx: DeltaContext, path: string): Promise<string> {
  const rel = toRel(path);
  if (rel === '' || (await resolve(ctx, rel)) !== null) throw new FsError('EEXIST', path);
  await requireDir(ctx, relParent(rel));
  await ensureUpperDir(ctx, relParent(rel));
  // A path whose codebase entry this sandbox deleted keeps that base (first sight wins): a replacement.
  await record(ctx, [{ op: 'base', path: rel, base: ABSENT }]);
  return rel;
}

/** Removes the merged entry at `rel`: upper entry removed, codebase entry whited out. */
export async function removeEntry(ctx: DeltaContext, rel: string, found: DeltaLookup): Promise<void> {
  if (found.layer === 'lower') {
    await record(ctx, [
      { op: 'base', path: rel, base: baseOf(found.stat) },
      { op: 'whiteout', path: rel },
    ]);
    return;
  }
  const records: MetaRecord[] = [];
  if (codebaseHad(ctx, rel, found)) {
    // An upper entry without a base is an implicit directory copied from the codebase (no record yet).
    if (!ctx.meta.hasBase(rel)) {
      const lo = await ctx.lower.lstatOrNull(rel);
      if (lo !== null) records.push({ op: 'base', path: rel, base: baseOf(lo) });
    }
    records.push({ op: 'whiteout', path: rel });
  } else {
    records.push({ op: 'unbase', path: rel });
  }
  // Metadata first: a crash in between leaves the entry visible (upper wins), never a lost whiteout.
  await record(ctx, records);
  await releaseUpper(ctx, rel);
  if (found.type === 'directory') await ctx.upper.rmdir(rel);
  else await ctx.upper.unlink(rel);
}

/** The base to record for `rel` given what the merged view shows there. */
export async function baseAt(ctx: DeltaContext, rel: string, found: DeltaLookup | null): Promise<BaseRecord> {
  if (found === null) return ABSENT;
  if (found.layer === 'lower') return baseOf(found.stat);
  const known = ctx.meta.base(rel);
  if (known !== undefined) return known;
  const lo = codebaseHad(ctx, rel, found) ? await ctx.lower.lstatOrNull(rel) : null;
  return lo === null ? ABSENT : baseOf(lo);
}

/** Records that make `rel` gone after its upper entry moves away. */
export function goneRecords(ctx: DeltaContext, rel: string): MetaRecord[] {
  const base = ctx.meta.base(rel);
  if (base?.exists === true || ctx.meta.isWhiteout(rel)) return [{ op: 'whiteout', path: rel }];
  return [{ op: 'unbase', path: rel }];
}

/** True when the codebase had an entry at `rel` that this sandbox's view replaced or shows. */
export function codebaseHad(ctx: DeltaContext, rel: string, found: DeltaLookup): boolean {
  if (found.layer === 'lower') return true;
  const base = ctx.meta.base(rel);
  if (base !== undefined) return base.exists;
  // No base: an implicit upper directory mirroring a codebase directory.
  return found.type === 'directory' && !ctx.meta.isHidden(rel);
}

/** True for a directory the sandbox created, with no codebase content at or below it. */
export function isAddedDir(ctx: DeltaContext, rel: string): boolean {
  const base = ctx.meta.base(rel);
  return base?.exists === false && !ctx.meta.isHidden(rel) && !ctx.meta.hasWhiteoutBelow(rel);
}
