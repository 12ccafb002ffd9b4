// Copy-up: bringing a lower entry into the upper layer before the sandbox changes it.
import { constants } from 'node:fs';
import fsp from 'node:fs/promises';

import { FsError } from '../errors.js';
import { fdPath } from '../host/flags.js';
import { relParent } from '../host/rel-path.js';
import {
  chargeDir,
  ensureUpperDir,
  tempName,
  upperStat,
  visibleLowerStat,
  type DeltaContext,
} from './context.js';
import { baseOf } from './identity.js';

export interface CopyUpOptions {
  /** Copy file content (false when the caller is about to truncate to 0). */
  readonly content?: boolean;
}

/**
 * Ensures `rel` exists in the upper layer, copying it from the lower layer if needed, and records its base.
 * Files keep content, mode and times (kernel copy: copy_file_range through the fds' magic links, so nothing
 * is ever looked up by path twice); symlinks are copied as links; directories as empty directories.
 * The copy is built in work/ and renamed into place, so a crash never leaves a half-copied upper file.
 * The quota records the copy and its parent directory, which grows with the names copied into it.
 */
export async function copyUp(ctx: DeltaContext, rel: string, options: CopyUpOptions = {}): Promise<void> {
  const up = await upperStat(ctx, rel);
  if (up === 'blocked') throw new FsError('ENOENT', `/${rel}`);
  if (up !== 'missing') return;
  const lo = await visibleLowerStat(ctx, rel);
  if (lo === null) throw new FsError('ENOENT', `/${rel}`);
  await ensureUpperDir(ctx, relParent(rel));
  // A copy costs the whole file before the sandbox writes a byte of it: checked before copying.
  if (ctx.quota !== null) {
    await ctx.quota.whenReady();
    ctx.quota.check(null, lo.isFile() && options.content !== false ? Number(lo.size) : 0, `/${rel}`);
  }
  ctx.journal.record([{ op: 'base', path: rel, base: baseOf(lo) }]);
  const atime = lo.atimeNs;
  const mtime = lo.mtimeNs;
  // chown before chmod: a chown clears set-id bits on the host, the chmod restores the codebase's mode.
  const own = ctx.owner;
  if (lo.isDirectory()) {
    await ctx.upper.mkdir(rel, 0o700);
    if (ctx.quota !== null) ctx.quota.record(await ctx.upper.lstat(rel));
    await chargeDir(ctx, relParent(rel));
    if (own !== null) await ctx.upper.lchown(rel, own.uid, own.gid);
    await ctx.upper.chmod(rel, Number(lo.mode));
    await ctx.upper.utimes(rel, atime, mtime);
    return;
  }
  const tmp = tempName('copyup');
  try {
    if (lo.isFile()) {
      await copyFileContent(ctx, rel, tmp, options.content ?? true);
      if (own !== null) await ctx.work.lchown(tmp, own.uid, own.gid);
      await ctx.work.chmod(tmp, Number(lo.mode));
    } else if (lo.isSymbolicLink()) {
      await ctx.work.symlink(await ctx.lower.readlink(rel), tmp);
      if (own !== null) await ctx.work.lchown(tmp, own.uid, own.gid);
    } else if (lo.isFIFO()) {
      await ctx.work.mknod(tmp, Number(lo.mode), 0);
      if (own !== null) await ctx.work.lchown(tmp, own.uid, own.gid);
    } else {
      throw new FsError('EPERM', `cannot copy up device or socket /${rel}`);
    }
    await ctx.work.utimes(tmp, atime, mtime);
    await ctx.work.rename(tmp, { dir: ctx.upper, rel });
    const st = await ctx.upper.lstatOrNull(rel);
    if (st !== null) ctx.quota?.record(st);
  } catch (err) {
    await ctx.work.removeTree(tmp);
    throw err;
  }
  await chargeDir(ctx, relParent(rel));
}

async function copyFileContent(ctx: DeltaContext, rel: string, tmp: string, content: boolean): Promise<void> {
  const dst = await ctx.work.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    if (!content) return;
    const src = await ctx.lower.open(rel, constants.O_RDONLY);
    try {
      // Both paths are magic links of fds opened with O_NOFOLLOW: they reopen exactly those inodes.
      await fsp.copyFile(fdPath(src.fd), fdPath(dst.fd));
    } finally {
      await src.close();
    }
  } finally {
    await dst.close();
  }
}
