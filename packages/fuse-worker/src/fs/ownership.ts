// Who owns an entry and who may change that. Owners are stored on the delta's upper entries
// (real host uid/gid, root-only tree); codebase entries show the sandbox owner. The kernel checks the
// same rules first (the mount uses default_permissions, with the caller's full credentials); these
// checks repeat them in the worker, so a mount without default_permissions, or a request the kernel let
// through for host root, is decided the same way.
import { readFileSync } from 'node:fs';
import type { BigIntStats } from 'node:fs';

import { FsError } from '../errors.js';

/** The ids a request carries (fuse_req_ctx: fsuid, fsgid, thread id). */
export interface Credentials {
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

export interface Owner {
  readonly uid: number;
  readonly gid: number;
}

const S_ISGID = 0o2000;

/**
 * The supplementary groups of the calling thread: FUSE requests carry only fsuid/fsgid, so they are read
 * from /proc/<tid>/status (the request's pid is the thread id). Empty when the thread is gone.
 */
export function supplementaryGroups(pid: number): readonly number[] {
  if (pid <= 0) return [];
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'latin1');
    const line = /^Groups:\s*(.*)$/m.exec(status);
    if (line === null) return [];
    return line[1]!
      .trim()
      .split(/\s+/)
      .filter((g) => g !== '')
      .map(Number);
  } catch {
    return [];
  }
}

/** True when the caller belongs to `gid` (its fsgid or a supplementary group). */
export function inGroup(caller: Credentials, gid: number): boolean {
  return caller.gid === gid || supplementaryGroups(caller.pid).includes(gid);
}

/**
 * chown(2) as Linux decides it (without capabilities other than root's): root may set anything; the owner
 * may "change" the owner to itself and the group to one of its own groups; nobody else may change either.
 * Absent ids are unchanged. Throws EPERM.
 */
export function checkChown(caller: Credentials, current: Owner, uid?: number, gid?: number): void {
  if (caller.uid === 0) return;
  if (uid !== undefined && uid !== current.uid) {
    throw new FsError('EPERM', `only root may give a file to another user (uid ${uid})`);
  }
  if (gid === undefined) {
    if (uid !== undefined && caller.uid !== current.uid) throw new FsError('EPERM', 'not the owner');
    return;
  }
  if (caller.uid !== current.uid) throw new FsError('EPERM', 'only the owner may change the group');
  if (gid !== current.gid && !inGroup(caller, gid)) {
    throw new FsError('EPERM', `the caller is not a member of group ${gid}`);
  }
}

/**
 * Owner and mode of a new entry (mkdir, create, mknod, symlink): the caller's fsuid; the group of a
 * set-gid parent directory, else the caller's fsgid (BSD group semantics via the set-gid bit, as Linux);
 * a directory made in a set-gid directory is set-gid too.
 */
export function newEntryOwner(
  caller: Credentials,
  parent: { readonly stat: BigIntStats; readonly owner: Owner } | null,
  isDir: boolean,
  mode: number,
): { readonly owner: Owner; readonly mode: number } {
  const setgidParent = parent !== null && (Number(parent.stat.mode) & S_ISGID) !== 0;
  if (!setgidParent) return { owner: { uid: caller.uid, gid: caller.gid }, mode };
  return { owner: { uid: caller.uid, gid: parent.owner.gid }, mode: isDir ? mode | S_ISGID : mode };
}
