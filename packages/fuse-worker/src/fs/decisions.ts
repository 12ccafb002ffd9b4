// The permission -> errno decisions every op shares (contract §2's table), each denial audited. Ops call
// these before any host I/O; what they throw is what the sandbox sees.
import type { Permission } from '@agentfense/protocol';
import { FsError } from '../errors.js';
import type { DeltaLookup } from '../delta/types.js';
import type { FsCore } from './core.js';
import { pendingAccess } from './kernel-denials.js';
import type { Caller } from './types.js';

/**
 * The permission a lookup answers with, or null for a hidden name (the denial audited): the caller answers
 * it exactly as a name that does not exist, a negative entry with the same timeout, so neither caching nor
 * timing tells a hidden file from an absent one (rule changes take those entries back: kernel-cache.ts).
 */
export function lookupPermission(
  fs: FsCore,
  path: string,
  found: DeltaLookup | null,
  caller: Caller,
): Permission | null {
  const permission = fs.rules.permissionOf(path);
  if (permission !== 'none') return permission;
  const traversable = found === null || found.type === 'directory' ? fs.rules.isTraversable(path) : false;
  if (traversable) return permission;
  deny(fs, 'lookup', path, permission, 'ENOENT', caller);
  return null;
}

/** The permission of a node that the kernel already holds; ENOENT if the rules now hide it. */
export function visiblePermission(
  fs: FsCore,
  path: string,
  isDir: boolean,
  caller: Caller,
  op: string,
): Permission {
  if (path === '/') {
    // The root is always there to list; only rules naming '/' exactly can raise it above view.
    const root = fs.rules.permissionOf('/');
    return root === 'none' ? 'view' : root;
  }
  const permission = fs.rules.permissionOf(path);
  if (permission === 'none' && !(isDir && fs.rules.isTraversable(path))) {
    throw deny(fs, op, path, permission, 'ENOENT', caller);
  }
  return permission;
}

/** A new entry at `name` in `parent` is allowed only where the rules say write (contract §2: else EACCES). */
export function creatable(fs: FsCore, parent: number, name: string, op: string, caller: Caller): string {
  const path = fs.childPath(parent, name);
  const permission = fs.rules.permissionOf(path);
  if (permission !== 'write') throw deny(fs, op, path, permission, 'EACCES', caller);
  return path;
}

/**
 * Removing or renaming away: none => ENOENT (it does not exist for the sandbox), view/read => EACCES. A
 * `none` directory kept traversable by an exception is listed, so it answers like a view one: EACCES.
 */
export function removable(fs: FsCore, path: string, op: string, caller: Caller, target?: string): void {
  const permission = fs.rules.permissionOf(path);
  if (permission === 'write') return;
  const errno = permission === 'none' && !fs.rules.isTraversable(path) ? 'ENOENT' : 'EACCES';
  throw deny(fs, op, path, permission, errno, caller, target);
}

/** Audits a denial and returns the error to throw. */
export function deny(
  fs: FsCore,
  op: string,
  path: string,
  permission: Permission,
  errno: string,
  caller: Caller,
  target?: string,
): FsError {
  // The warm-up's walker only lists what the sandbox may see; a refusal it meets is a race with a rule
  // change that kills it, and no access of the sandbox: the sandbox's trail never shows it.
  if (fs.warmup?.isWalker(caller) !== true)
    fs.audit.record({
      op,
      path,
      ...(target === undefined ? {} : { target }),
      decision: 'deny',
      permission,
      errno,
      pid: caller.pid,
    });
  return new FsError(
    errno,
    `${op} ${path}: ${permission === 'none' ? 'no such file or directory' : `permission is ${permission}`}`,
  );
}

/**
 * A GETATTR of a file the sandbox may not write may be the kernel re-validating it before refusing an
 * open or truncate from the mode bits (kernel-denials.ts): audit that refusal, with the rule's verdict.
 */
export function auditKernelDenial(
  fs: FsCore,
  path: string,
  permission: 'read' | 'view',
  caller: Caller,
): void {
  const pending = pendingAccess(caller.pid);
  if (pending === null) return;
  if (pending.access === 'write' || permission === 'view') {
    fs.audit.record({
      op: pending.op,
      path,
      decision: 'deny',
      permission,
      errno: 'EACCES',
      pid: caller.pid,
    });
  }
}

/** Audits an allowed op (only when the audit asks for allows). */
export function allow(
  fs: FsCore,
  op: string,
  path: string,
  permission: Permission,
  caller: Caller,
  target?: string,
): void {
  if (!fs.audit.allowed) return;
  // The warm-up's walker (entry-warmup.ts) is the worker's own: its listings are no access of the sandbox.
  // It is killed when the audit is switched on; this covers the requests it had in flight.
  if (fs.warmup?.isWalker(caller) === true) return;
  fs.audit.record({
    op,
    path,
    ...(target === undefined ? {} : { target }),
    decision: 'allow',
    permission,
    pid: caller.pid,
  });
}
