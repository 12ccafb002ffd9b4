// Namespace ops: MKDIR, MKNOD, SYMLINK, CREATE, UNLINK, RMDIR, RENAME, LINK. They always reach the worker
// (the kernel never caches namespace changes), so their checks are exact; new entries belong to their
// creator (ownership.ts), removed ones stay readable through descriptors opened before.
import { constants } from 'node:fs';
import { FsError } from '../errors.js';
import type { FsCore } from './core.js';
import { allow, creatable, deny, removable, visiblePermission } from './decisions.js';
import type { Inode } from './inodes.js';
import { newEntryOwner, type Owner } from './ownership.js';
import type { Caller, CreateReply, EntryReply } from './types.js';

const S_IFMT = constants.S_IFMT;
const S_IFIFO = constants.S_IFIFO;
const S_IFREG = constants.S_IFREG;
const S_IFSOCK = constants.S_IFSOCK;
const S_IFCHR = constants.S_IFCHR;
const S_IFBLK = constants.S_IFBLK;
const O_ACCMODE = 0o3; // not exported by node:fs constants

/** MKDIR. */
export async function mkdir(
  fs: FsCore,
  parent: number,
  name: string,
  mode: number,
  caller: Caller,
): Promise<EntryReply> {
  const path = creatable(fs, parent, name, 'mkdir', caller);
  const made = await newOwner(fs, parent, caller, true, mode & 0o7777);
  await fs.subdirCounts.change([parent], fs.countsAsSubdir(path) ? 1 : 0, () =>
    fs.delta.mkdir(path, made.mode, made.owner),
  );
  return created(fs, parent, name, path, caller, 'mkdir', made);
}

/**
 * MKNOD: regular files, FIFOs, Unix sockets (bind(2)) and device nodes, in write areas. Devices need
 * root (CAP_MKNOD; EPERM otherwise, as on any disk) and are inert metadata: the mount is nodev and they
 * stay in the delta's root-only upper tree. FIFOs, sockets and devices are never committed (skipped).
 */
export async function mknod(
  fs: FsCore,
  parent: number,
  name: string,
  mode: number,
  rdev: number | bigint,
  caller: Caller,
): Promise<EntryReply> {
  const path = creatable(fs, parent, name, 'mknod', caller);
  const type = mode & S_IFMT;
  const made = await newOwner(fs, parent, caller, false, mode & 0o7777);
  if (type === S_IFREG || type === 0) {
    await (await fs.delta.create(path, made.mode)).close();
  } else if (type === S_IFIFO) {
    await fs.delta.mknod(path, made.mode | S_IFIFO);
  } else if (type === S_IFSOCK) {
    await fs.delta.mksock(path, made.mode);
  } else if ((type === S_IFCHR || type === S_IFBLK) && caller.uid === 0) {
    await fs.delta.mknod(path, made.mode | type, rdev);
  } else {
    throw deny(fs, 'mknod', path, 'write', type === S_IFCHR || type === S_IFBLK ? 'EPERM' : 'EINVAL', caller);
  }
  return created(fs, parent, name, path, caller, 'mknod', made);
}

/** SYMLINK: stored as a symlink; only the kernel inside the sandbox ever resolves it. */
export async function symlink(
  fs: FsCore,
  target: string,
  parent: number,
  name: string,
  caller: Caller,
): Promise<EntryReply> {
  const path = creatable(fs, parent, name, 'symlink', caller);
  const made = await newOwner(fs, parent, caller, false, 0o777);
  await fs.delta.symlink(target, path);
  return created(fs, parent, name, path, caller, 'symlink', made);
}

/**
 * CREATE: a new regular file, kept open for the writes that follow. Opened write-only (a shell's `>`,
 * `cp`, `dd`, `tar x`), its descriptor gets direct I/O (directWrites): each write(2) reaches us as a
 * WRITE, as it would through the page cache (our mount has no writeback cache), but without first being
 * copied into the mount's page cache, which also keeps the data out of memory twice (mount and backing
 * file). Such a descriptor can be neither read nor mmap'd, so nothing else changes for its process;
 * other opens of the file stay cached, and the kernel drops their cached pages over a range it writes
 * directly. What the kernel no longer does on those writes is clear set-id bits: data-ops.ts does.
 */
export async function create(
  fs: FsCore,
  parent: number,
  name: string,
  mode: number,
  flags: number,
  caller: Caller,
): Promise<CreateReply> {
  const path = creatable(fs, parent, name, 'create', caller);
  const made = await newOwner(fs, parent, caller, false, mode & 0o7777);
  const epoch = fs.delta.layerEpoch;
  const handle = await fs.delta.create(path, made.mode, (flags & ~O_ACCMODE) | constants.O_RDWR, made.owner);
  const reply = await created(fs, parent, name, path, caller, 'create', made);
  // Kept only if no checkpoint began meanwhile (the file may be a frozen layer's now); a write opens the
  // path again otherwise.
  if (epoch === fs.delta.layerEpoch) fs.handles.set(reply.ino, handle, true);
  else await handle.close();
  const directIo = fs.directWrites && (flags & O_ACCMODE) === constants.O_WRONLY;
  if (directIo) fs.directWriters.add(reply.ino);
  return { ...reply, directIo };
}

/** UNLINK: needs write; a node the sandbox may still have open keeps a host handle until forgotten. */
export async function unlink(fs: FsCore, parent: number, name: string, caller: Caller): Promise<void> {
  const path = fs.childPath(parent, name);
  removable(fs, path, 'unlink', caller);
  const node = fs.inodes.child(parent, name);
  if (node !== undefined) await keepOpenable(fs, node, path);
  await fs.delta.unlink(path);
  fs.inodes.unlink(parent, name);
  // Its path may be another name now, under another rule: its READs are decided again (native-reads.ts).
  if (node !== undefined) fs.nativeReads?.closing(node.ino);
  fs.forgetListing(parent);
  // another name of it keeps the node: the kernel dropped its link count
  if (node !== undefined) fs.cache.entries.attrsStale(node.ino);
  fs.nativeLookups?.consider(parent);
  allow(fs, 'unlink', path, 'write', caller);
}

/** RMDIR: needs write; refused (ENOTEMPTY) while the directory holds anything, hidden entries included. */
export async function rmdir(fs: FsCore, parent: number, name: string, caller: Caller): Promise<void> {
  const path = fs.childPath(parent, name);
  removable(fs, path, 'rmdir', caller);
  await fs.subdirCounts.change([parent], fs.countsAsSubdir(path) ? -1 : 0, () => fs.delta.rmdir(path));
  fs.inodes.unlink(parent, name);
  fs.forgetListing(parent);
  fs.nativeLookups?.consider(parent);
  allow(fs, 'rmdir', path, 'write', caller);
}

/** RENAME: needs write at both paths; moved nodes get fresh attributes (their rules may differ). */
export async function rename(
  fs: FsCore,
  parent: number,
  name: string,
  newParent: number,
  newName: string,
  caller: Caller,
): Promise<void> {
  const from = fs.childPath(parent, name);
  const to = fs.childPath(newParent, newName);
  removable(fs, from, 'rename', caller, to);
  const toPermission = fs.rules.permissionOf(to);
  if (toPermission !== 'write') throw deny(fs, 'rename', to, toPermission, 'EACCES', caller, from);
  // A file renamed over may still be open in the sandbox: keep its host file reachable.
  const replaced = fs.inodes.child(newParent, newName);
  // Everything below is write at both places (decided from the rules, no walk): nothing inside can be
  // refused and no attribute the kernel holds for it changes, so neither is walked.
  const alike = fs.rules.uniformBelow(from) === 'write' && fs.rules.uniformBelow(to) === 'write';
  if (replaced !== undefined && replaced !== fs.inodes.child(parent, name)) {
    await keepOpenable(fs, replaced, to);
  }
  try {
    // A directory moves only if everything in it may be written both where it is and where it lands
    // (contract §2: rename needs write at both paths, for each entry): hidden content never moves, and no
    // entry lands on a path the sandbox could not have created (commit would write it there).
    const landing = (p: string): string => to + p.slice(from.length);
    const refuse = (p: string): boolean =>
      fs.rules.permissionOf(p) !== 'write' || fs.rules.permissionOf(landing(p)) !== 'write';
    // Whatever moved (a directory changes both parents' link counts), both are counted again.
    await fs.subdirCounts.change([parent, newParent], 0, () =>
      fs.delta.rename(from, to, alike ? {} : { refuse }),
    );
  } catch (err) {
    if (err instanceof FsError && err.errnoName === 'EACCES') {
      throw deny(fs, 'rename', from, 'write', 'EACCES', caller, to);
    }
    throw err;
  }
  const moved = fs.inodes.child(parent, name);
  fs.inodes.rename(parent, name, newParent, newName);
  fs.forgetListing(parent);
  fs.forgetListing(newParent);
  if (moved !== undefined) {
    // Copy-up may have happened (a codebase file is renamed through the delta).
    if (!moved.isDir) fs.forgetHandleUnlessWritable(moved.ino);
    fs.cache.invalidateTree(moved, { below: !alike });
  }
  allow(fs, 'rename', from, 'write', caller, to);
}

/** LINK: needs write at both paths; the link lives in the delta (copy-up first), never in the codebase. */
export async function link(
  fs: FsCore,
  ino: number,
  newParent: number,
  newName: string,
  caller: Caller,
): Promise<EntryReply> {
  const node = fs.node(ino);
  const from = fs.pathOrStale(ino);
  const fromPermission = visiblePermission(fs, from, node.isDir, caller, 'link');
  if (fromPermission !== 'write') throw deny(fs, 'link', from, fromPermission, 'EACCES', caller);
  const to = creatable(fs, newParent, newName, 'link', caller);
  // One inode has one set of mode bits in the kernel: two names decided by different rules could later
  // (after a rule change) need different ones, and writes through either name would hit the same file.
  // contract §2: such links are EXDEV, so tools fall back to a copy.
  if (fs.rules.decide(from).ruleIndex !== fs.rules.decide(to).ruleIndex) {
    throw deny(fs, 'link', from, 'write', 'EXDEV', caller, to);
  }
  await fs.delta.link(from, to);
  fs.forgetHandleUnlessWritable(ino);
  fs.inodes.alias(ino, newParent, newName);
  fs.forgetListing(newParent);
  allow(fs, 'link', from, 'write', caller, to);
  const entry = fs.entry(node, to, await fs.mustFind(to), 'write');
  // the kernel drops the attributes of a node it links (link count, ctime)
  fs.cache.entries.attrsStale(ino);
  return entry;
}

/** Owner and mode of a new entry in directory `parent` (ownership.ts: set-gid directories). */
async function newOwner(
  fs: FsCore,
  parent: number,
  caller: Caller,
  isDir: boolean,
  mode: number,
): Promise<{ readonly owner: Owner; readonly mode: number }> {
  const parentPath = fs.inodes.pathOf(parent);
  const found = parentPath === null ? null : await fs.delta.lookup(parentPath);
  return newEntryOwner(
    caller,
    found === null ? null : { stat: found.stat, owner: fs.ownerOf(found) },
    isDir,
    mode,
  );
}

async function created(
  fs: FsCore,
  parent: number,
  name: string,
  path: string,
  caller: Caller,
  op: string,
  made: { readonly owner: Owner; readonly mode: number },
): Promise<EntryReply> {
  let found = await fs.mustFind(path);
  const { owner } = made;
  if (Number(found.stat.uid) !== owner.uid || Number(found.stat.gid) !== owner.gid) {
    // The worker made it as itself: hand it to the caller. The mode again after the chown, which
    // clears set-id bits on the host (a symlink has no mode of its own).
    await fs.delta.setattr(path, {
      uid: owner.uid,
      gid: owner.gid,
      ...(found.type === 'symlink' ? {} : { mode: made.mode }),
    });
    found = await fs.mustFind(path);
  }
  const node = fs.inodes.remember(parent, name, found.type === 'directory');
  fs.forgetListing(parent);
  allow(fs, op, path, 'write', caller);
  return fs.entry(node, path, found, 'write');
}

/**
 * No OPEN reaches us, so we cannot know whether a file losing its name is open: keep a host handle for
 * its node (one fd, until the kernel forgets the node), read-write when it is the sandbox's own file.
 * Best effort: failing only affects a later access through a descriptor opened before.
 */
async function keepOpenable(fs: FsCore, node: Inode, path: string): Promise<void> {
  if (node.isDir) return;
  if (fs.handles.get(node.ino, true) === undefined) {
    const epoch = fs.delta.layerEpoch;
    // Synchronously where it can (most UNLINKs of `rm -r`): a pool trip otherwise.
    const kept = fs.delta.openToKeepIfIdle(path) ?? (await fs.delta.openToKeep(path).catch(() => undefined));
    // A writable fd opened before a checkpoint began may name a frozen layer's file: not kept.
    if (kept?.writable === true && epoch !== fs.delta.layerEpoch) await kept.handle.close();
    else if (kept?.writable === true) fs.handles.set(node.ino, kept.handle, true);
    else if (kept !== undefined) fs.handles.set(node.ino, kept.handle, false);
  }
  fs.handles.pin(node.ino);
}
