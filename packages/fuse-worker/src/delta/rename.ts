// rename(2)/renameat2(2) in the overlay: what may move (a directory only if the sandbox added it), the
// records that keep the codebase's entries accounted for, and RENAME_EXCHANGE.
import { FsError } from '../errors.js';
import { relIsWithin, relJoin, relParent } from '../host/rel-path.js';
import {
  chargeDir,
  checkName,
  ensureUpperDir,
  mergedIsEmpty,
  mustResolve,
  releaseUpper,
  requireDir,
  resolve,
  tempName,
  type DeltaContext,
} from './context.js';
import { copyUp } from './copy-up.js';
import type { MetaRecord } from './meta-state.js';
import { toCodebase, toRel } from './paths.js';
import { baseAt, codebaseHad, goneRecords, isAddedDir, record } from './records.js';
import type { DeltaEntryType, DeltaLookup, RenameOptions } from './types.js';

/**
 * A non-directory from the codebase is copied up, renamed in the upper layer and whited out at its old
 * path. A directory may move only if the sandbox added it (no codebase content at or below it); anything
 * else is EXDEV, so tools fall back to copy + delete (no redirect metadata). Runs under the delta's lock.
 */
export async function renameEntry(
  ctx: DeltaContext,
  from: string,
  to: string,
  options: RenameOptions,
): Promise<void> {
  const src = toRel(from);
  const dst = toRel(to);
  if (src === '' || dst === '') throw new FsError('EBUSY', 'the root');
  const srcFound = await mustResolve(ctx, src);
  if (src !== dst && relIsWithin(dst, src)) throw new FsError('EINVAL', `${to} is inside ${from}`);
  const dstFound = await resolve(ctx, dst);
  if (options.exchange === true) return exchange(ctx, src, dst, srcFound, dstFound);
  if (dstFound !== null && options.noReplace === true) throw new FsError('EEXIST', to);
  if (src === dst) return;
  if (dstFound !== null) {
    if (srcFound.type === 'directory' && dstFound.type !== 'directory') throw new FsError('ENOTDIR', to);
    if (srcFound.type !== 'directory' && dstFound.type === 'directory') throw new FsError('EISDIR', to);
    if (dstFound.type === 'directory' && !(await mergedIsEmpty(ctx, dst))) {
      throw new FsError('ENOTEMPTY', to);
    }
  }
  await requireDir(ctx, relParent(dst));
  if (srcFound.type === 'directory') {
    if (!isAddedDir(ctx, src)) throw new FsError('EXDEV', `directory with codebase content: ${from}`);
    if (options.refuse !== undefined && (await subtreeHas(ctx, src, options.refuse))) {
      throw new FsError('EACCES', `${from} holds entries that must not move`);
    }
  } else {
    await copyUp(ctx, src);
  }
  await ensureUpperDir(ctx, relParent(dst));
  // The destination: what the codebase holds there stays recorded as its base (first sight wins).
  const records: MetaRecord[] = [{ op: 'base', path: dst, base: await baseAt(ctx, dst, dstFound) }];
  // A directory moved over a codebase directory must not show that directory's (deleted) entries.
  if (srcFound.type === 'directory' && dstFound !== null && codebaseHad(ctx, dst, dstFound)) {
    records.push({ op: 'whiteout', path: dst });
  }
  if (dstFound?.layer === 'lower' && dstFound.type === 'directory') await ensureUpperDir(ctx, dst);
  // The source: a codebase entry is now deleted there; an add simply moved.
  records.push(...goneRecords(ctx, src));
  if (srcFound.type === 'directory') records.push({ op: 'move', from: src, to: dst });
  await checkName(ctx, dst);
  await record(ctx, records);
  if (dstFound?.layer === 'upper') await releaseUpper(ctx, dst);
  await ctx.upper.rename(src, { dir: ctx.upper, rel: dst });
  await chargeDir(ctx, relParent(dst));
}

/**
 * True when `pred` holds for some entry strictly below directory `rel`, a directory the sandbox added:
 * nothing of the codebase is at or below it (isAddedDir), so its upper listing is its merged one and the
 * walk lists one layer (no codebase lookups, no whiteout checks per level).
 */
async function subtreeHas(
  ctx: DeltaContext,
  rel: string,
  pred: (path: string, type: DeltaEntryType) => boolean,
): Promise<boolean> {
  for (const { name, type } of await ctx.upper.readdir(rel)) {
    const child = relJoin(rel, name);
    if (pred(toCodebase(child), type)) return true;
    if (type === 'directory' && (await subtreeHas(ctx, child, pred))) return true;
  }
  return false;
}

/** RENAME_EXCHANGE of two non-directories: copy both up, swap through a temp name in work/. */
async function exchange(
  ctx: DeltaContext,
  src: string,
  dst: string,
  a: DeltaLookup,
  b: DeltaLookup | null,
): Promise<void> {
  if (b === null) throw new FsError('ENOENT', `/${dst}`);
  if (a.type === 'directory' || b.type === 'directory') throw new FsError('EXDEV', 'exchange of directories');
  if (src === dst) return;
  await copyUp(ctx, src);
  await copyUp(ctx, dst);
  // Base records describe codebase paths, and both paths still exist: nothing to record.
  const tmp = tempName('exchange');
  const { upper, work } = ctx;
  await upper.rename(src, { dir: work, rel: tmp });
  await upper.rename(dst, { dir: upper, rel: src });
  await work.rename(tmp, { dir: upper, rel: dst });
}
