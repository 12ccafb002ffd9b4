// Attribute ops on a node the kernel holds: GETATTR, SETATTR (chmod, chown, truncate, utimens),
// READLINK, ACCESS, SETXATTR/REMOVEXATTR; and the same for nodes that lost their last name but are open.
import { constants } from 'node:fs';
import { hostIo } from '@agentfense/fuse-native';
import { atLeast } from '@agentfense/protocol';
import type { Permission } from '@agentfense/protocol';
import { FsError } from '../errors.js';
import { timespec } from '../host/host-dir.js';
import { toAttr } from './attrs.js';
import type { FuseAttr } from './attrs.js';
import type { FsCore } from './core.js';
import { allow, auditKernelDenial, deny, visiblePermission } from './decisions.js';
import { auditDirDenial } from './dir-denials.js';
import type { Inode } from './inodes.js';
import { checkChown } from './ownership.js';
import type { DeltaLookup, SetattrOptions } from '../delta/types.js';
import type { Caller, SetattrChanges } from './types.js';

const S_IFDIR = constants.S_IFDIR;

/** GETATTR. */
export async function getattr(fs: FsCore, ino: number, caller: Caller): Promise<FuseAttr> {
  const node = fs.node(ino);
  const path = fs.inodes.pathOf(ino);
  if (path === null) return orphanAttr(fs, node);
  // Fresh attributes are re-asked only when the kernel is about to refuse (dir-attr-freshness.ts).
  const reasked = node.isDir && fs.cache.dirAttrs.isFresh(ino);
  visiblePermission(fs, path, node.isDir, caller, 'getattr');
  const found = await fs.mustFind(path);
  const nlink = found.type === 'directory' ? await fs.links(ino, path, found) : null;
  // The mode bits follow the rules in force when we answer, not when we started (setRules may run).
  const permission = visiblePermission(fs, path, node.isDir, caller, 'getattr');
  if (!node.isDir && (permission === 'read' || permission === 'view')) {
    auditKernelDenial(fs, path, permission, caller);
  }
  const fresh = fs.attr(node, path, found, permission);
  if (node.isDir) {
    // Shown without its w bit by the rules: the kernel refuses creates and deletes in it by itself.
    if (reasked && permission !== 'write' && (fresh.mode & 0o200) === 0) {
      const started = performance.now();
      const pending = auditDirDenial(fs, path, caller);
      if (pending !== null) await pending;
      // Counted in `stats` (and so in bench:fs's per-line op counts): the warm path should show none.
      fs.stats?.record('refusal-check', (performance.now() - started) * 1000, false);
    }
    fs.cache.dirAttrs.note(ino, fs.ttl);
  } else fs.cache.entries.attrsSent(ino, fs.ttl);
  return nlink === null ? fresh : { ...fresh, nlink };
}

/**
 * SETATTR: chmod, chown, truncate, utimens need write (rules); chown then follows POSIX with the
 * caller's credentials (ownership.ts). The kernel has already applied Linux's other rules with the
 * caller's full credentials (default_permissions): owner-only chmod/utimes, set-gid dropped by chmod
 * for non-members, and set-id bits cleared on write, truncate and chown (it sends us the new mode).
 *
 * The answer itself, not a promise, where the delta makes the change at once (Delta.setattrIfIdle: a
 * mode or times on an entry of the writable layer, what `tar -x` sends after every file).
 */
export function setattr(
  fs: FsCore,
  ino: number,
  changes: SetattrChanges,
  caller: Caller,
): FuseAttr | Promise<FuseAttr> {
  try {
    return setattrNow(fs, ino, changes, caller);
  } catch (err) {
    // A refusal is a rejection, as from the asynchronous path.
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

function setattrNow(
  fs: FsCore,
  ino: number,
  changes: SetattrChanges,
  caller: Caller,
): FuseAttr | Promise<FuseAttr> {
  const node = fs.node(ino);
  const path = fs.inodes.pathOf(ino);
  const chown = changes.uid !== undefined || changes.gid !== undefined;
  // Visibility first: a node the rules now hide is ENOENT for chown too (and its audit says so).
  const permission = path === null ? 'write' : visiblePermission(fs, path, node.isDir, caller, 'setattr');
  if (path === null) return orphanSetattr(fs, node, changes, changes.atime, changes.mtime, caller);
  if (permission !== 'write') throw deny(fs, chown ? 'chown' : 'setattr', path, permission, 'EACCES', caller);
  const attrs: SetattrOptions = {
    ...(changes.uid === undefined ? {} : { uid: changes.uid }),
    ...(changes.gid === undefined ? {} : { gid: changes.gid }),
    ...(changes.mode === undefined ? {} : { mode: changes.mode & 0o7777 }),
    ...(changes.size === undefined ? {} : { size: changes.size }),
    ...(changes.atime === undefined ? {} : { atime: changes.atime }),
    ...(changes.mtime === undefined ? {} : { mtime: changes.mtime }),
  };
  if (!chown && fs.delta.setattrIfIdle(path, attrs)) {
    changed(fs, node, path, permission, caller);
    const now = fs.delta.lookupIfCached(path);
    return now === undefined || now === null
      ? fs.mustFind(path).then((f) => changedAttr(fs, node, path, f, permission))
      : changedAttr(fs, node, path, now, permission);
  }
  return setattrInDelta(fs, node, path, attrs, permission, caller);
}

async function setattrInDelta(
  fs: FsCore,
  node: Inode,
  path: string,
  attrs: SetattrOptions,
  permission: Permission,
  caller: Caller,
): Promise<FuseAttr> {
  if (attrs.uid !== undefined || attrs.gid !== undefined) {
    const current = fs.ownerOf(await fs.mustFind(path));
    try {
      checkChown(caller, current, attrs.uid, attrs.gid);
    } catch {
      throw deny(fs, 'chown', path, permission, 'EPERM', caller);
    }
  }
  await fs.delta.setattr(path, attrs);
  changed(fs, node, path, permission, caller);
  return changedAttr(fs, node, path, await fs.mustFind(path), permission);
}

/** What follows a change of attributes: the handle kept, the audit, the directory's freshness. */
function changed(fs: FsCore, node: Inode, path: string, permission: Permission, caller: Caller): void {
  // A first change copies the file up: any cached handle may still point at the codebase file.
  if (!node.isDir) fs.forgetHandleUnlessWritable(node.ino);
  allow(fs, 'setattr', path, permission, caller);
  if (node.isDir) fs.cache.dirAttrs.note(node.ino, fs.ttl);
}

/** The attributes a SETATTR answers with, from the entry as it is after the change. */
function changedAttr(
  fs: FsCore,
  node: Inode,
  path: string,
  found: DeltaLookup,
  permission: Permission,
): FuseAttr {
  const attr = fs.attr(node, path, found, permission);
  if (!node.isDir) fs.cache.entries.attrsSent(node.ino, fs.ttl);
  return attr;
}

/** READLINK: needs read (view shows that the link exists, not where it points). */
export async function readlink(fs: FsCore, ino: number, caller: Caller): Promise<string> {
  const path = fs.pathOrStale(ino);
  const permission = visiblePermission(fs, path, false, caller, 'readlink');
  if (!atLeast(permission, 'read')) throw deny(fs, 'readlink', path, permission, 'EACCES', caller);
  allow(fs, 'readlink', path, permission, caller);
  return fs.delta.readlink(path);
}

/** ACCESS (only sent without default_permissions): answered from the rules, not only mode bits. */
export async function access(fs: FsCore, ino: number, mask: number, caller: Caller): Promise<void> {
  const node = fs.node(ino);
  const path = fs.pathOrStale(ino);
  const permission = visiblePermission(fs, path, node.isDir, caller, 'access');
  const effective: Permission = node.isDir && permission === 'none' ? 'view' : permission;
  const wantsWrite = (mask & constants.W_OK) !== 0;
  const wantsRead = (mask & constants.R_OK) !== 0 && !node.isDir;
  if ((wantsWrite && effective !== 'write') || (wantsRead && !atLeast(effective, 'read'))) {
    throw deny(fs, 'access', path, permission, 'EACCES', caller);
  }
  if ((mask & constants.X_OK) !== 0) {
    const attr = await getattr(fs, ino, caller);
    if ((attr.mode & 0o111) === 0) throw new FsError('EACCES', `${path} is not executable`);
  }
}

/** SETXATTR/REMOVEXATTR: need write (contract §2); storing attributes is not supported (ENOTSUP). */
export function xattrSet(fs: FsCore, ino: number, name: string, caller: Caller): never {
  const path = fs.pathOrStale(ino);
  const permission = visiblePermission(fs, path, fs.node(ino).isDir, caller, 'setxattr');
  if (permission !== 'write') throw deny(fs, 'setxattr', path, permission, 'EACCES', caller);
  throw new FsError('ENOTSUP', `${path}: extended attributes (${name}) are not supported`);
}

async function orphanAttr(fs: FsCore, node: Inode): Promise<FuseAttr> {
  if (node.isDir) {
    // A removed directory still someone's cwd: empty, no links, as a disk reports it.
    const now = BigInt(Date.now()) * 1_000_000n;
    return {
      ino: node.stIno,
      mode: S_IFDIR | 0o755,
      nlink: 0,
      uid: fs.uid,
      gid: fs.gid,
      rdev: 0,
      size: 0,
      blocks: 0,
      blksize: 4096,
      atimeNs: now,
      mtimeNs: now,
      ctimeNs: now,
    };
  }
  const handle = fs.handles.get(node.ino, false);
  if (handle === undefined) throw new FsError('ENOENT', `inode ${node.ino} was removed`);
  const stat = await handle.stat({ bigint: true });
  return toAttr(stat, {
    ino: node.stIno,
    permission: 'write',
    uid: Number(stat.uid),
    gid: Number(stat.gid),
  });
}

async function orphanSetattr(
  fs: FsCore,
  node: Inode,
  changes: SetattrChanges,
  atime: bigint | 'now' | undefined,
  mtime: bigint | 'now' | undefined,
  caller: Caller,
): Promise<FuseAttr> {
  const handle = fs.handles.get(node.ino, true);
  if (handle === undefined) throw new FsError('ENOENT', `inode ${node.ino} was removed`);
  if (changes.uid !== undefined || changes.gid !== undefined) {
    const st = await handle.stat({ bigint: true });
    checkChown(caller, { uid: Number(st.uid), gid: Number(st.gid) }, changes.uid, changes.gid);
    await handle.chown(changes.uid ?? -1, changes.gid ?? -1);
  }
  if (changes.mode !== undefined) await handle.chmod(changes.mode & 0o7777);
  // Shrinking frees blocks inside the syscall (a removed spool file of a GiB: ~0.3 s): in the thread pool.
  // Sizes above 2^53 (bigint) stay exact through hostIo; no file that big has blocks to free here.
  if (typeof changes.size === 'number') await handle.truncate(changes.size);
  else if (changes.size !== undefined) hostIo.ftruncate(handle.fd, changes.size);
  if (atime !== undefined || mtime !== undefined) {
    const [aSec, aNsec] = timespec(atime);
    const [mSec, mNsec] = timespec(mtime);
    hostIo.futimens(handle.fd, aSec, aNsec, mSec, mNsec);
  }
  return orphanAttr(fs, node);
}
