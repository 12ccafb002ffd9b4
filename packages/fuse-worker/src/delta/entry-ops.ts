// Namespace and attribute changes that need more than a create: device and FIFO nodes, sockets, hard
// links and setattr. Called by Delta under its lock, after the caller's permission checks.
import { FsError } from '../errors.js';
import { relParent } from '../host/rel-path.js';
import {
  chargeDir,
  chargeNew,
  checkName,
  mustResolve,
  resolveIfCached,
  tempName,
  type DeltaContext,
} from './context.js';
import { copyUp } from './copy-up.js';
import { toRel } from './paths.js';
import { prepareCreate } from './records.js';
import type { SetattrOptions } from './types.js';

const S_IFMT = 0o170000;
const S_IFIFO = 0o010000;
const S_IFCHR = 0o020000;
const S_IFBLK = 0o060000;

/** mknod(2) of a FIFO or a device node (EPERM for other types). */
export async function mknodAt(
  ctx: DeltaContext,
  path: string,
  mode: number,
  rdev: number | bigint,
): Promise<void> {
  const type = mode & S_IFMT;
  if (type !== S_IFIFO && type !== S_IFCHR && type !== S_IFBLK)
    throw new FsError('EPERM', `mknod of type ${type.toString(8)}: ${path}`);
  const rel = await prepareCreate(ctx, path);
  await chargeNew(ctx, rel, 0, async () => {
    await ctx.upper.mknod(rel, type | 0o600, type === S_IFIFO ? 0 : rdev);
    await ctx.upper.chmod(rel, mode & 0o7777); // exact: the worker's umask is not the caller's
  });
}

/** A Unix socket node, bound in work/ under a short name and renamed into place. */
export async function mksockAt(ctx: DeltaContext, path: string, mode: number): Promise<void> {
  const rel = await prepareCreate(ctx, path);
  const tmp = tempName('sock');
  await chargeNew(ctx, rel, 0, async () => {
    await ctx.work.mksock(tmp, mode);
    await ctx.work.rename(tmp, { dir: ctx.upper, rel });
  });
}

/** A hard link inside the writable layer (copy-up first: a link never reaches into a lower layer). */
export async function linkAt(ctx: DeltaContext, existing: string, newPath: string): Promise<void> {
  const from = toRel(existing);
  const src = await mustResolve(ctx, from);
  if (src.type === 'directory') throw new FsError('EPERM', `hard link to a directory: ${existing}`);
  const rel = await prepareCreate(ctx, newPath);
  await copyUp(ctx, from);
  await checkName(ctx, rel);
  await ctx.upper.link(from, { dir: ctx.upper, rel });
  await chargeDir(ctx, relParent(rel));
}

/** Changes attributes (copy-up first). size 0 skips copying the content. */
export async function setattrAt(ctx: DeltaContext, path: string, attrs: SetattrOptions): Promise<void> {
  const rel = toRel(path);
  if (rel === '') throw new FsError('EPERM', 'attributes of the root');
  const found = await mustResolve(ctx, rel);
  if (attrs.size !== undefined && found.type === 'directory') throw new FsError('EISDIR', path);
  if (attrs.size !== undefined && found.type !== 'file') throw new FsError('EINVAL', path);
  await copyUp(ctx, rel, { content: attrs.size !== 0 });
  const { upper } = ctx;
  if (attrs.uid !== undefined || attrs.gid !== undefined) {
    await upper.lchown(rel, attrs.uid ?? -1, attrs.gid ?? -1);
  }
  // Linux has no lchmod: a symlink's mode is always 0777 and never changes.
  if (attrs.mode !== undefined && found.type !== 'symlink') await upper.chmod(rel, attrs.mode & 0o7777);
  if (attrs.size !== undefined) {
    // A size change adds no block (growing leaves a hole): only what is written later costs.
    const quota = ctx.quota;
    if (quota !== null) await quota.whenReady();
    await upper.truncate(rel, attrs.size);
    if (quota !== null) quota.record(await upper.lstat(rel));
  }
  if (attrs.atime !== undefined || attrs.mtime !== undefined) {
    await upper.utimes(rel, attrs.atime, attrs.mtime);
  }
}

/**
 * setattrAt() without a promise, for an entry already in the writable layer under a cached directory fd
 * and only a mode or times to set (what `tar -x` sends after each file): no copy-up, truncation or chown.
 * False where a step would need the thread pool; setattrAt() then does the whole change (each step sets
 * a value, so one done here already is done again harmlessly).
 */
export function setattrIfCached(ctx: DeltaContext, path: string, attrs: SetattrOptions): boolean {
  if (attrs.size !== undefined || attrs.uid !== undefined || attrs.gid !== undefined) return false;
  const rel = toRel(path);
  const found = rel === '' ? undefined : resolveIfCached(ctx, rel);
  if (found === undefined || found === null || found.layer !== 'upper') return false;
  const { upper } = ctx;
  // Linux has no lchmod: a symlink's mode is always 0777 and never changes.
  if (
    attrs.mode !== undefined &&
    found.type !== 'symlink' &&
    !upper.chmodIfCached(rel, attrs.mode & 0o7777)
  ) {
    return false;
  }
  const times = attrs.atime !== undefined || attrs.mtime !== undefined;
  return !times || upper.utimesIfCached(rel, attrs.atime, attrs.mtime);
}
