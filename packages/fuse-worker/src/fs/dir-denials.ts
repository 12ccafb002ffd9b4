// Creates and removes the kernel refuses by itself in a directory the sandbox may only read or view
// (mkdir, creat/open O_CREAT, mknod, bind, symlink, link, unlink, rmdir, rename): such a directory shows
// no w bit, so may_create()/may_delete() (fs/namei.c) fail in generic_permission() and no request of the
// operation reaches us. What does reach us is fuse_permission()'s re-ask: a GETATTR of that directory
// while its attributes are still fresh (dir-attr-freshness.ts), sent while the caller waits inside its
// syscall. Here we read that syscall and its path arguments (caller-syscall.ts), confirm that this
// directory is the parent the operation targets (a walk through it never re-asks, and the kernel would
// not refuse a create of an existing name or a delete of a missing one), and audit the refusal once,
// with the path and the verdict of the rule at it, as the worker audits the refusals it makes itself.
import { readFile } from 'node:fs/promises';
import type { FsCore } from './core.js';
import {
  callerDir,
  callerMounts,
  decodeNamespaceCall,
  isNamespaceSyscall,
  readPath,
  syscallLine,
} from './caller-syscall.js';
import type { NamespaceCall, PathArg } from './caller-syscall.js';
import type { Caller } from './types.js';

/** A path argument split the way the kernel does: its parent (inside our mount, if known) and last name. */
interface SplitPath {
  readonly name: string;
  /** The parent directory as a path of this mount, or null when it is not in it or cannot be told. */
  readonly parent: string | null;
}

/**
 * Audits the refusal behind a re-asked GETATTR of directory `dir` (a path of this mount), if the caller
 * is inside a namespace syscall that targets it. Only called when the kernel re-asks (attributes fresh)
 * for a directory that shows no w bit. Answers null at once, after one pread, when the caller is in no
 * namespace syscall: the kernel also GETATTRs fresh directories for a stat after a listing (which marks
 * their atime stale), on every warm `grep -r`, and those must cost nothing more.
 */
export function auditDirDenial(fs: FsCore, dir: string, caller: Caller): Promise<void> | null {
  const tid = caller.pid;
  const line = syscallLine(tid);
  if (line === null || !isNamespaceSyscall(line)) return null;
  return auditCall(fs, dir, line, tid);
}

async function auditCall(fs: FsCore, dir: string, line: string, tid: number): Promise<void> {
  const call = await decodeNamespaceCall(line, tid);
  if (call === null) return;
  const refused = await refusedEntry(fs, call, dir, tid);
  if (refused === null) return;
  fs.audit.record({
    op: call.op,
    path: refused.path,
    ...(refused.target === undefined ? {} : { target: refused.target }),
    decision: 'deny',
    permission: fs.rules.permissionOf(refused.path),
    errno: 'EACCES',
    pid: tid,
  });
}

/** The entry whose create/delete the kernel refuses in `dir`, or null if this GETATTR is not that. */
async function refusedEntry(
  fs: FsCore,
  call: NamespaceCall,
  dir: string,
  tid: number,
): Promise<{ path: string; target?: string } | null> {
  const mounts = await mountsOf(fs, tid);
  const [first, second] = await Promise.all(call.paths.map((arg) => splitPath(tid, arg, mounts)));
  if (first === undefined || first === null) return null;
  const inDir = (s: SplitPath): string => (dir === '/' ? `/${s.name}` : `${dir}/${s.name}`);
  const whole = (s: SplitPath | null | undefined): string | undefined =>
    s?.parent == null ? undefined : s.parent === '/' ? `/${s.name}` : `${s.parent}/${s.name}`;
  if (call.op === 'rename') {
    // vfs_rename checks may_delete(old dir) first, then the new directory, then (a directory moving to
    // another parent) write on the moved directory itself, for its "..".
    if (first.parent === dir) return withTarget(inDir(first), whole(second));
    if (second != null && second.parent === dir) return withTarget(inDir(second), whole(first));
    if (whole(first) === dir) return withTarget(dir, whole(second));
    // Not resolvable by name (a symlink on the way, a chroot): the kernel re-asks only for a refusal, so
    // take the side that fits this directory's content.
    if (await visibleIn(fs, inDir(first))) return withTarget(inDir(first), whole(second));
    return second == null ? null : withTarget(inDir(second), whole(first));
  }
  // One path: its parent must be this directory, unless the path cannot be resolved by name (then the
  // re-ask itself says so). The kernel refuses creates only of names that do not exist, deletes only of
  // names that do: that also keeps an open(O_CREAT) of an existing file (create is not needed) out.
  if (first.parent !== null && first.parent !== dir && (await resolvesByName(fs, first, mounts))) return null;
  const path = inDir(first);
  const exists = await visibleIn(fs, path);
  const deletes = call.op === 'unlink' || call.op === 'rmdir';
  if (exists !== deletes) return null;
  return withTarget(path, call.op === 'link' ? whole(second) : undefined);
}

function withTarget(path: string, target: string | undefined): { path: string; target?: string } {
  return target === undefined ? { path } : { path, target };
}

/** Whether `path` is an entry the sandbox sees (hidden ones do not exist for it). */
async function visibleIn(fs: FsCore, path: string): Promise<boolean> {
  const found = await fs.delta.lookup(path).catch(() => null);
  if (found === null) return false;
  if (fs.rules.permissionOf(path) !== 'none') return true;
  return found.type === 'directory' && fs.rules.isTraversable(path);
}

/**
 * Whether the lexical parent of a path is where the kernel's walk ends: no component of it is a symlink
 * in this mount (a symlink outside it would have left our mount altogether).
 */
async function resolvesByName(fs: FsCore, split: SplitPath, mounts: readonly Mount[]): Promise<boolean> {
  if (mounts.length === 0 || split.parent === null) return false;
  let path = '';
  for (const part of split.parent.split('/')) {
    if (part === '') continue;
    path = `${path}/${part}`;
    const found = await fs.delta.lookup(path).catch(() => null);
    if (found === null || found.type === 'symlink') return false;
  }
  return true;
}

interface Mount {
  readonly mountpoint: string;
  readonly root: string;
}

/** Splits a path argument into its parent (as a path of this mount) and last name; null if not refusable. */
async function splitPath(tid: number, arg: PathArg, mounts: readonly Mount[]): Promise<SplitPath | null> {
  const text = await readPath(tid, arg.address);
  if (text === null) return null;
  const trimmed = text.replace(/\/+$/, '');
  const slash = trimmed.lastIndexOf('/');
  const name = trimmed.slice(slash + 1);
  // "", "." and ".." are refused before any permission check (EEXIST, EINVAL, EBUSY...).
  if (name === '' || name === '.' || name === '..') return null;
  const parentText = slash < 0 ? '' : trimmed.slice(0, slash);
  let absolute: string | null;
  if (trimmed.startsWith('/')) absolute = parentText === '' ? '/' : parentText;
  else {
    const base = callerDir(tid, arg.dirfd);
    absolute = base === null ? null : `${base}/${parentText}`;
  }
  return { name, parent: absolute === null ? null : inMount(normalize(absolute), mounts) };
}

/** `.`/`..`/`//` folded by name, as the kernel's walk would without symlinks. */
function normalize(path: string): string {
  const parts: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}

/** A caller-namespace absolute path as a path of this mount (the deepest of its mount points wins). */
function inMount(absolute: string, mounts: readonly Mount[]): string | null {
  let best: Mount | undefined;
  for (const m of mounts) {
    const under =
      m.mountpoint === '/' || absolute === m.mountpoint || absolute.startsWith(`${m.mountpoint}/`);
    if (under && (best === undefined || m.mountpoint.length > best.mountpoint.length)) best = m;
  }
  if (best === undefined) return null;
  const rest = best.mountpoint === '/' ? absolute : absolute.slice(best.mountpoint.length);
  return normalize(`${best.root}/${rest}`);
}

/** The connection number of our own mount, from the worker's mountinfo (read once). */
let ownMinor: { mountpoint: string; minor: number | null } | undefined;

async function mountsOf(fs: FsCore, tid: number): Promise<Mount[]> {
  const mountpoint = fs.mountpoint;
  if (mountpoint === undefined) return [];
  if (ownMinor?.mountpoint !== mountpoint) ownMinor = { mountpoint, minor: await minorAt(mountpoint) };
  return ownMinor.minor === null ? [] : callerMounts(tid, ownMinor.minor);
}

async function minorAt(mountpoint: string): Promise<number | null> {
  let found: number | null = null;
  try {
    for (const line of (await readFile('/proc/self/mountinfo', 'utf8')).split('\n')) {
      const fields = line.split(' ');
      const point = (fields[4] ?? '').replace(/\\([0-7]{3})/g, (_, o: string) =>
        String.fromCharCode(parseInt(o, 8)),
      );
      if (point === mountpoint && line.includes(' - fuse')) found = Number((fields[2] ?? '').split(':')[1]);
    }
  } catch {
    return null;
  }
  return found !== null && Number.isInteger(found) ? found : null;
}
