// The filesystem a sandbox sees: one handler per low-level FUSE op (like libfuse's passthrough_hp).
// Order inside every op: resolve the node's path -> permission check (contract §2, audited on denial) ->
// copy-on-write resolution in the delta -> host I/O. Handlers return values or throw FsError; the
// binding adapter (binding.ts) owns the reply conventions.
//
// Invariants:
// - A path whose permission is `none` is answered exactly like a path that does not exist (ENOENT),
//   unless it is a directory kept traversable by an exception inside it.
// - Namespace changes (create, mkdir, unlink, rename, link, ...) always reach us (the kernel never caches
//   them), so their checks are exact. Data on the warm path may be served by the kernel's caches; what
//   the kernel enforces there is the mode bits we report (attrs.ts), and rule changes invalidate them.
import { constants, readSync, writeSync } from 'node:fs';
import { hostIo } from 'fuse-native/lowlevel.js';
import { statfs } from 'node:fs/promises';
import { atLeast } from '@agentfense/protocol';
import type { Permission, RuleSet } from '@agentfense/protocol';
import type { AuditLog } from '../audit.js';
import type { Delta } from '../delta/delta.js';
import type { DeltaLookup } from '../delta/types.js';
import { quotaStatfs, writeWithin } from '../delta/quota.js';
import { timespec } from '../host/host-dir.js';
import type { HostFile } from '../host/raw-file.js';
import { FsError } from '../errors.js';
import { stableIno, toAttr } from './attrs.js';
import type { FuseAttr } from './attrs.js';
import { HandleCache } from './handles.js';
import { InodeTable, ROOT_INO } from './inodes.js';
import type { OpStats } from './op-stats.js';
import { ReadAhead } from './read-ahead.js';
import { ReadPredictor } from './read-predictor.js';
import type { Inode } from './inodes.js';
import { WriteHints } from './write-hints.js';
import { checkChown, newEntryOwner, type Owner } from './ownership.js';
import { pendingAccess } from './kernel-denials.js';

/** Who asked (from the FUSE request header). */
export interface Caller {
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

/** A positive lookup answer. */
export interface EntryReply {
  readonly ino: number;
  readonly attr: FuseAttr;
  readonly entryTimeout: number;
  readonly attrTimeout: number;
}

/** A negative lookup answer the kernel may cache (the name does not exist at all). */
export interface NegativeEntry {
  readonly ino: 0;
  readonly entryTimeout: number;
}

/** One packed directory entry. */
export interface DirEntryOut {
  readonly name: string;
  readonly ino: number;
  /** File type bits (S_IFDIR, S_IFREG, ...). */
  readonly mode: number;
  /** Offset of the entry after this one. */
  readonly nextOffset: number;
}

/** SETATTR fields (absent = unchanged); sizes exact (bigint above 2^53 - 1), times in ns or 'now'. */
export interface SetattrChanges {
  readonly mode?: number;
  readonly uid?: number;
  readonly gid?: number;
  readonly size?: number | bigint;
  readonly atime?: bigint | 'now';
  readonly mtime?: bigint | 'now';
}

/** A file offset exactly as the kernel sent it: a bigint above 2^53 - 1 (see docs/fuse-native.md). */
export type Offset = number | bigint;

export interface StatfsReply {
  readonly bsize: number;
  readonly frsize: number;
  readonly blocks: number;
  readonly bfree: number;
  readonly bavail: number;
  readonly files: number;
  readonly ffree: number;
  readonly favail: number;
  readonly namemax: number;
}

/** Kernel cache invalidation (implemented by the binding; must never block the JS thread on the kernel). */
export interface Invalidator {
  /** Drops the kernel's attributes and cached data of a node. */
  inode(ino: number): Promise<void>;
  /** Drops the kernel's dentry `name` in directory `parent` (positive or negative). */
  entry(parent: number, name: string): Promise<void>;
}

export interface PolicyFsOptions {
  readonly delta: Delta;
  readonly rules: RuleSet;
  readonly audit: AuditLog;
  /** Seconds the kernel may cache visible entries and attributes. */
  readonly cacheTtlSeconds: number;
  /** Owner reported for every entry (the mounting uid, which is the sandbox user inside bwrap). */
  readonly uid: number;
  readonly gid: number;
  /** A host path on the delta's filesystem, for statfs. */
  readonly statfsPath: string;
  /** Where read-ahead warm-ups are counted (as op `readahead`), next to the requests. */
  readonly stats?: OpStats;
}

const S_IFMT = constants.S_IFMT;
const S_IFDIR = constants.S_IFDIR;
const S_IFIFO = constants.S_IFIFO;
const S_IFREG = constants.S_IFREG;
const S_IFSOCK = constants.S_IFSOCK;
const S_IFCHR = constants.S_IFCHR;
const S_IFBLK = constants.S_IFBLK;
const O_ACCMODE = 0o3; // not exported by node:fs constants
const FALLOC_FL_KEEP_SIZE = 0x01;
/** READs up to this size are served with a synchronous pread (small files, single pages). */
const SYNC_READ_MAX = 32 * 1024;
/** Size of the pooled buffers for bigger READs (the kernel's max_read with libfuse2) and how many to keep. */
const BIG_READ_BYTES = 128 * 1024;
const BIG_READ_POOL = 8;
/** How much of each file ReadAhead warms, and where that data lands (only the host page cache wants it). */
const WARM_SINK = Buffer.allocUnsafeSlow(64 * 1024);
/** Bound on remembered negative entries (see #negativeTtl): a few MB at most. */
const MAX_NEGATIVES = 20_000;

/** The policy-enforcing copy-on-write filesystem of one sandbox. */
export class PolicyFs {
  readonly inodes = new InodeTable();
  readonly handles = new HandleCache();
  readonly #delta: Delta;
  readonly #audit: AuditLog;
  readonly #ttl: number;
  readonly #uid: number;
  readonly #gid: number;
  readonly #statfsPath: string;
  readonly #stats: OpStats | undefined;
  #rules: RuleSet;
  #hints: WriteHints;
  /** Merged, filtered listings by directory node, so offset > 0 continues the same snapshot. */
  readonly #listings = new Map<number, DirEntryOut[]>();
  /** Bumped when an invalidation of the kernel's caches starts; lookups that straddle one are not cached. */
  #generation = 0;
  /** Names answered with a cached negative entry since the last invalidateAll (parent node id + name). */
  readonly #negatives = new Map<string, { readonly parent: number; readonly name: string }>();
  /**
   * The identity and version (ino, size, mtime, ctime) last reported for nodes served from the codebase.
   * When it moves, the codebase file was replaced or changed behind this sandbox (another sandbox's
   * commit, an editor on the host): the host handle (which would keep reading the old inode) and the
   * kernel's pages must go. Seen at the next getattr/lookup, i.e. within the attribute timeout.
   */
  readonly #lowerVersions = new Map<number, string>();
  readonly #predictor = new ReadPredictor();
  readonly #readAhead = new ReadAhead({
    listing: (dir) => this.#listings.get(dir),
    warm: (dir, name) => this.#warm(dir, name),
  });
  invalidator: Invalidator | undefined;
  /** Scratch space of readReply's synchronous small reads. */
  #readBuffer = Buffer.allocUnsafeSlow(SYNC_READ_MAX);
  /** Reusable buffers of readReply's asynchronous big reads (one per read in flight). */
  readonly #bigReadBuffers: Buffer[] = [];

  constructor(options: PolicyFsOptions) {
    this.#delta = options.delta;
    this.#rules = options.rules;
    this.#hints = new WriteHints(options.rules);
    this.#audit = options.audit;
    this.#ttl = options.cacheTtlSeconds;
    this.#uid = options.uid;
    this.#gid = options.gid;
    this.#statfsPath = options.statfsPath;
    this.#stats = options.stats;
  }

  get rules(): RuleSet {
    return this.#rules;
  }

  /**
   * Replaces the rules and makes the kernel forget every cached decision: attributes (mode bits), data
   * pages, dentries and directory listings of every node it knows. Resolves when the kernel has them.
   */
  async setRules(rules: RuleSet): Promise<void> {
    this.#rules = rules;
    this.#hints = new WriteHints(rules);
    await this.invalidateAll();
  }

  // --- namespace -----------------------------------------------------------------------------------

  /** LOOKUP: a visible entry, null for a name that does not exist (cacheable), ENOENT for a hidden one. */
  async lookup(parent: number, name: string, caller: Caller): Promise<EntryReply | NegativeEntry> {
    const generation = this.#generation;
    const path = this.#childPath(parent, name);
    this.#lookupPermission(path, null, caller);
    const found = await this.#delta.lookup(path);
    // Decided after the await, with the rules in force now (setRules may have run meanwhile).
    const permission = this.#lookupPermission(path, found, caller);
    // An invalidation that started while we looked (rule change, discard, commit, writeFile) may already
    // have been processed by the kernel: an answer cached now could outlive it, so cache nothing.
    const ttl = generation === this.#generation ? this.#ttl : 0;
    if (found === null) return { ino: 0, entryTimeout: this.#negativeTtl(parent, name, ttl) };
    const node = this.inodes.remember(parent, name, found.type === 'directory');
    this.#allow('lookup', path, permission, caller);
    let entry = this.#entry(node, path, found, permission, ttl);
    if (found.type === 'directory')
      entry = { ...entry, attr: { ...entry.attr, nlink: await this.#links(path) } };
    if (found.type === 'file' && atLeast(permission, 'read')) {
      this.#predictor.noteLookup(node.ino);
      if (this.#predictor.readsFollowLookups) this.#readAhead.onLookup(parent, name);
    }
    return entry;
  }

  /** ReadAhead's warm-up of a listed file: only content the sandbox may read now, never rejects. */
  async #warm(dir: number, name: string): Promise<void> {
    const path = this.inodes.childPath(dir, name);
    if (path === null || !atLeast(this.#rules.permissionOf(path), 'read')) return;
    const started = performance.now();
    await this.#delta.warm(path, WARM_SINK);
    this.#stats?.record('readahead', (performance.now() - started) * 1000, false);
  }

  /**
   * The kernel keeps a negative entry for the TTL, and pruning its parent does not reliably drop it (a
   * directory's dentry is spliced back with its children), so invalidateAll names each one it may hold.
   * Past MAX_NEGATIVES remembered names, further negative answers are not cached at all.
   */
  #negativeTtl(parent: number, name: string, ttl: number): number {
    if (ttl === 0) return 0;
    const key = `${parent}/${name}`;
    if (!this.#negatives.has(key)) {
      if (this.#negatives.size >= MAX_NEGATIVES) return 0;
      this.#negatives.set(key, { parent, name });
    }
    return ttl;
  }

  /** The permission a lookup answers with; hidden names throw ENOENT (never cached: a rule may reveal them). */
  #lookupPermission(path: string, found: DeltaLookup | null, caller: Caller): Permission {
    const permission = this.#rules.permissionOf(path);
    if (permission !== 'none') return permission;
    const traversable =
      found === null || found.type === 'directory' ? this.#rules.isTraversable(path) : false;
    if (!traversable) throw this.#deny('lookup', path, permission, 'ENOENT', caller);
    return permission;
  }

  /** FORGET: the kernel dropped references; the node's host handle goes with it. */
  forget(ino: number, count: number): void {
    this.inodes.forget(ino, count);
    if (this.inodes.get(ino) === undefined) {
      this.handles.drop(ino);
      this.#forgetListing(ino);
      this.#lowerVersions.delete(ino);
    }
  }

  /** GETATTR. */
  async getattr(ino: number, caller: Caller): Promise<FuseAttr> {
    const node = this.#node(ino);
    const path = this.inodes.pathOf(ino);
    if (path === null) return this.#orphanAttr(node);
    this.#visiblePermission(path, node.isDir, caller, 'getattr');
    const found = await this.#mustFind(path);
    const nlink = found.type === 'directory' ? await this.#links(path) : null;
    // The mode bits follow the rules in force when we answer, not when we started (setRules may run).
    const permission = this.#visiblePermission(path, node.isDir, caller, 'getattr');
    if (!node.isDir && (permission === 'read' || permission === 'view')) {
      this.#auditKernelDenial(path, permission, caller);
    }
    const fresh = this.#attr(node, path, found, permission);
    return nlink === null ? fresh : { ...fresh, nlink };
  }

  /**
   * A directory's link count from what the sandbox may see: 2 + its visible subdirectories (the host's
   * count would reveal hidden and whited-out ones through `stat -c %h`). Costs a merged listing, once per
   * attribute timeout.
   */
  async #links(path: string): Promise<number> {
    let subdirs = 0;
    for (const entry of await this.#delta.readdir(path)) {
      if (entry.type !== 'directory') continue;
      const child = path === '/' ? `/${entry.name}` : `${path}/${entry.name}`;
      if (this.#rules.permissionOf(child) === 'none' && !this.#rules.isTraversable(child)) continue;
      subdirs++;
    }
    return 2 + subdirs;
  }

  /**
   * SETATTR: chmod, chown, truncate, utimens need write (rules); chown then follows POSIX with the
   * caller's credentials (ownership.ts). The kernel has already applied Linux's other rules with the
   * caller's full credentials (default_permissions): owner-only chmod/utimes, set-gid dropped by chmod
   * for non-members, and set-id bits cleared on write, truncate and chown (it sends us the new mode).
   */
  async setattr(ino: number, changes: SetattrChanges, caller: Caller): Promise<FuseAttr> {
    const node = this.#node(ino);
    const path = this.inodes.pathOf(ino);
    const chown = changes.uid !== undefined || changes.gid !== undefined;
    // Visibility first: a node the rules now hide is ENOENT for chown too (and its audit says so).
    const permission = path === null ? 'write' : this.#visiblePermission(path, node.isDir, caller, 'setattr');
    const atime = changes.atime;
    const mtime = changes.mtime;
    if (path === null) return this.#orphanSetattr(node, changes, atime, mtime, caller);
    if (permission !== 'write')
      throw this.#deny(chown ? 'chown' : 'setattr', path, permission, 'EACCES', caller);
    if (chown) {
      const current = this.#ownerOf(await this.#mustFind(path));
      try {
        checkChown(caller, current, changes.uid, changes.gid);
      } catch {
        throw this.#deny('chown', path, permission, 'EPERM', caller);
      }
    }
    await this.#delta.setattr(path, {
      ...(changes.uid === undefined ? {} : { uid: changes.uid }),
      ...(changes.gid === undefined ? {} : { gid: changes.gid }),
      ...(changes.mode === undefined ? {} : { mode: changes.mode & 0o7777 }),
      ...(changes.size === undefined ? {} : { size: changes.size }),
      ...(atime === undefined ? {} : { atime }),
      ...(mtime === undefined ? {} : { mtime }),
    });
    // A first change copies the file up: any cached handle may still point at the codebase file.
    if (!node.isDir) this.#forgetHandleUnlessWritable(ino);
    this.#allow('setattr', path, permission, caller);
    return this.#attr(node, path, await this.#mustFind(path), permission);
  }

  /** READLINK: needs read (view shows that the link exists, not where it points). */
  async readlink(ino: number, caller: Caller): Promise<string> {
    const path = this.#pathOrStale(ino);
    const permission = this.#visiblePermission(path, false, caller, 'readlink');
    if (!atLeast(permission, 'read')) throw this.#deny('readlink', path, permission, 'EACCES', caller);
    this.#allow('readlink', path, permission, caller);
    return this.#delta.readlink(path);
  }

  /** MKDIR. */
  async mkdir(parent: number, name: string, mode: number, caller: Caller): Promise<EntryReply> {
    const path = this.#creatable(parent, name, 'mkdir', caller);
    const made = await this.#newOwner(parent, caller, true, mode & 0o7777);
    await this.#delta.mkdir(path, made.mode);
    return this.#created(parent, name, path, caller, 'mkdir', made);
  }

  /**
   * MKNOD: regular files, FIFOs, Unix sockets (bind(2)) and device nodes, in write areas. Devices need
   * root (CAP_MKNOD; EPERM otherwise, as on any disk) and are inert metadata: the mount is nodev and they
   * stay in the delta's root-only upper tree. FIFOs, sockets and devices are never committed (skipped).
   */
  async mknod(
    parent: number,
    name: string,
    mode: number,
    rdev: number | bigint,
    caller: Caller,
  ): Promise<EntryReply> {
    const path = this.#creatable(parent, name, 'mknod', caller);
    const type = mode & S_IFMT;
    const made = await this.#newOwner(parent, caller, false, mode & 0o7777);
    if (type === S_IFREG || type === 0) {
      await (await this.#delta.create(path, made.mode)).close();
    } else if (type === S_IFIFO) {
      await this.#delta.mknod(path, made.mode | S_IFIFO);
    } else if (type === S_IFSOCK) {
      await this.#delta.mksock(path, made.mode);
    } else if ((type === S_IFCHR || type === S_IFBLK) && caller.uid === 0) {
      await this.#delta.mknod(path, made.mode | type, rdev);
    } else {
      throw this.#deny(
        'mknod',
        path,
        'write',
        type === S_IFCHR || type === S_IFBLK ? 'EPERM' : 'EINVAL',
        caller,
      );
    }
    return this.#created(parent, name, path, caller, 'mknod', made);
  }

  /** SYMLINK: stored as a symlink; only the kernel inside the sandbox ever resolves it. */
  async symlink(target: string, parent: number, name: string, caller: Caller): Promise<EntryReply> {
    const path = this.#creatable(parent, name, 'symlink', caller);
    const made = await this.#newOwner(parent, caller, false, 0o777);
    await this.#delta.symlink(target, path);
    return this.#created(parent, name, path, caller, 'symlink', made);
  }

  /** CREATE: a new regular file, kept open for the writes that follow. */
  async create(
    parent: number,
    name: string,
    mode: number,
    flags: number,
    caller: Caller,
  ): Promise<EntryReply> {
    const path = this.#creatable(parent, name, 'create', caller);
    const made = await this.#newOwner(parent, caller, false, mode & 0o7777);
    const handle = await this.#delta.create(path, made.mode, (flags & ~O_ACCMODE) | constants.O_RDWR);
    const reply = await this.#created(parent, name, path, caller, 'create', made);
    this.handles.set(reply.ino, handle, true);
    return reply;
  }

  /** UNLINK: needs write; a node the sandbox may still have open keeps a host handle until forgotten. */
  async unlink(parent: number, name: string, caller: Caller): Promise<void> {
    const path = this.#childPath(parent, name);
    this.#removable(path, 'unlink', caller);
    const node = this.inodes.child(parent, name);
    if (node !== undefined) await this.#keepOpenable(node, path);
    await this.#delta.unlink(path);
    this.inodes.unlink(parent, name);
    this.#forgetListing(parent);
    this.#allow('unlink', path, 'write', caller);
  }

  /** RMDIR: needs write; refused (ENOTEMPTY) while the directory holds anything, hidden entries included. */
  async rmdir(parent: number, name: string, caller: Caller): Promise<void> {
    const path = this.#childPath(parent, name);
    this.#removable(path, 'rmdir', caller);
    await this.#delta.rmdir(path);
    this.inodes.unlink(parent, name);
    this.#forgetListing(parent);
    this.#allow('rmdir', path, 'write', caller);
  }

  /** RENAME: needs write at both paths; moved nodes get fresh attributes (their rules may differ). */
  async rename(
    parent: number,
    name: string,
    newParent: number,
    newName: string,
    caller: Caller,
  ): Promise<void> {
    const from = this.#childPath(parent, name);
    const to = this.#childPath(newParent, newName);
    this.#removable(from, 'rename', caller, to);
    const toPermission = this.#rules.permissionOf(to);
    if (toPermission !== 'write') throw this.#deny('rename', to, toPermission, 'EACCES', caller, from);
    // A file renamed over may still be open in the sandbox: keep its host file reachable.
    const replaced = this.inodes.child(newParent, newName);
    if (replaced !== undefined && replaced !== this.inodes.child(parent, name)) {
      await this.#keepOpenable(replaced, to);
    }
    try {
      // A directory moves only if everything in it may be written both where it is and where it lands
      // (contract §2: rename needs write at both paths, for each entry): hidden content never moves, and no
      // entry lands on a path the sandbox could not have created (commit would write it there).
      const landing = (p: string): string => to + p.slice(from.length);
      const refuse = (p: string): boolean =>
        this.#rules.permissionOf(p) !== 'write' || this.#rules.permissionOf(landing(p)) !== 'write';
      await this.#delta.rename(from, to, { refuse });
    } catch (err) {
      if (err instanceof FsError && err.errnoName === 'EACCES') {
        throw this.#deny('rename', from, 'write', 'EACCES', caller, to);
      }
      throw err;
    }
    const moved = this.inodes.child(parent, name);
    this.inodes.rename(parent, name, newParent, newName);
    this.#forgetListing(parent);
    this.#forgetListing(newParent);
    if (moved !== undefined) {
      // Copy-up may have happened (a codebase file is renamed through the delta).
      if (!moved.isDir) this.#forgetHandleUnlessWritable(moved.ino);
      this.#invalidateTree(moved);
    }
    this.#allow('rename', from, 'write', caller, to);
  }

  /** LINK: needs write at both paths; the link lives in the delta (copy-up first), never in the codebase. */
  async link(ino: number, newParent: number, newName: string, caller: Caller): Promise<EntryReply> {
    const node = this.#node(ino);
    const from = this.#pathOrStale(ino);
    const fromPermission = this.#visiblePermission(from, node.isDir, caller, 'link');
    if (fromPermission !== 'write') throw this.#deny('link', from, fromPermission, 'EACCES', caller);
    const to = this.#creatable(newParent, newName, 'link', caller);
    // One inode has one set of mode bits in the kernel: two names decided by different rules could later
    // (after a rule change) need different ones, and writes through either name would hit the same file.
    // contract §2: such links are EXDEV, so tools fall back to a copy.
    if (this.#rules.decide(from).ruleIndex !== this.#rules.decide(to).ruleIndex) {
      throw this.#deny('link', from, 'write', 'EXDEV', caller, to);
    }
    await this.#delta.link(from, to);
    this.#forgetHandleUnlessWritable(ino);
    this.inodes.alias(ino, newParent, newName);
    this.#forgetListing(newParent);
    this.#allow('link', from, 'write', caller, to);
    return this.#entry(node, to, await this.#mustFind(to), 'write');
  }

  /** READDIR: '.', '..', then the merged entries the rules let the sandbox see. */
  async readdir(ino: number, offset: number, caller: Caller): Promise<readonly DirEntryOut[]> {
    let listing = offset === 0 ? undefined : this.#listings.get(ino);
    if (listing === undefined) {
      const path = this.#pathOrStale(ino);
      this.#visiblePermission(path, true, caller, 'readdir');
      listing = await this.#list(ino, path);
      this.#listings.set(ino, listing);
    }
    return offset === 0 ? listing : listing.slice(offset);
  }

  // --- data ------------------------------------------------------------------------------------------

  /** READ: needs read; served from a per-node host handle. */
  async read(ino: number, size: number, offset: Offset, caller: Caller): Promise<Buffer> {
    this.#predictor.noteRead(ino);
    // Synchronous pread (see #withFd): from the page cache it takes a few µs, an async one 40+ µs.
    return this.#withFd(ino, false, caller, 'read', (fd) => {
      const buffer = Buffer.allocUnsafe(size);
      const bytesRead = readSync(fd, buffer, 0, size, offset);
      return bytesRead === size ? buffer : buffer.subarray(0, bytesRead);
    });
  }

  /**
   * READ answered through `reply` straight from reusable buffers: no allocation per request (a cold
   * 1 GiB read is 8192 READs of 128 KiB). `reply` must send synchronously (the binding's replyBuf writes
   * to /dev/fuse before returning), because the buffer is reused right after it returns.
   */
  async readReply(
    ino: number,
    size: number,
    offset: Offset,
    caller: Caller,
    reply: (data: Uint8Array) => void,
  ): Promise<void> {
    this.#predictor.noteRead(ino);
    if (size > SYNC_READ_MAX) {
      // Big reads are the kernel's readahead of a large file, several in flight at once: done in the
      // thread pool they overlap with each other and with the disk; done synchronously they queue up on
      // the JS thread (a cold 1 GiB `dd` measured 5.6x native that way, ~1-1.5x like this).
      const handle = await this.#handle(ino, false, caller, 'read');
      const buffer = this.#bigReadBuffers.pop() ?? Buffer.allocUnsafeSlow(Math.max(size, BIG_READ_BYTES));
      try {
        const { bytesRead } = await handle.read(buffer, 0, size, offset);
        reply(buffer.subarray(0, bytesRead));
      } finally {
        if (buffer.length === BIG_READ_BYTES && this.#bigReadBuffers.length < BIG_READ_POOL) {
          this.#bigReadBuffers.push(buffer);
        }
      }
      return;
    }
    await this.#withFd(ino, false, caller, 'read', (fd) => {
      const buffer = this.#readBuffer;
      reply(buffer.subarray(0, readSync(fd, buffer, 0, size, offset)));
    });
  }

  /**
   * WRITE: needs write; the first write copies the file up into the delta. An offset above 2^53 - 1
   * arrives as a bigint and goes to pwrite(2) exactly (hostIo): Node's writeSync would take it as "the
   * current position" and write elsewhere. The host filesystem answers EFBIG past its own limit.
   */
  async write(ino: number, data: Buffer, offset: Offset, caller: Caller): Promise<number> {
    const put = (fd: number): number =>
      typeof offset === 'bigint'
        ? hostIo.pwrite(fd, data, offset)
        : writeSync(fd, data, 0, data.length, offset);
    const quota = this.#delta.quota;
    if (quota === null) return this.#withFd(ino, true, caller, 'write', put);
    if (!quota.ready) await quota.whenReady();
    // Number(offset) only rounds above 2^53, far beyond any quota: such a write is refused either way.
    return this.#withFd(ino, true, caller, 'write', (fd) =>
      writeWithin(quota, fd, { offset: Number(offset), length: data.length }, `write #${ino}`, () => put(fd)),
    );
  }

  /**
   * FALLOCATE: needs write (the first one copies the file up). Mode 0 (allocate, may extend the file)
   * and KEEP_SIZE (allocate past the end without changing the size); anything else (punch hole,
   * collapse/zero/insert range) is EOPNOTSUPP, which tools treat as "not on this filesystem". Within
   * the disk quota: a range ending past it is ENOSPC at once, before any block is allocated (without
   * this op glibc's posix_fallocate wrote 1 TiB of zeros for 300 s).
   */
  async fallocate(ino: number, mode: number, offset: Offset, length: Offset, caller: Caller): Promise<void> {
    if (mode !== 0 && mode !== FALLOC_FL_KEEP_SIZE) {
      throw new FsError('EOPNOTSUPP', `fallocate mode ${mode} is not supported (only 0 and KEEP_SIZE)`);
    }
    const end = BigInt(offset) + BigInt(length);
    const quota = this.#delta.quota;
    if (quota !== null && !quota.ready) await quota.whenReady();
    await this.#withFd(ino, true, caller, 'write', (fd) => {
      if (quota === null) {
        hostIo.fallocate(fd, mode, offset, length);
        return;
      }
      const bytes = end > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(end);
      writeWithin(quota, fd, { offset: bytes, length: 0 }, `fallocate #${ino}`, () => {
        hostIo.fallocate(fd, mode, offset, length);
        return 0;
      });
    });
  }

  /** FSYNC: flushes the host file if we hold one. */
  async fsync(ino: number, datasync: boolean): Promise<void> {
    const handle = this.handles.get(ino, false);
    if (handle === undefined) return;
    await (datasync ? handle.datasync() : handle.sync());
  }

  // --- misc -------------------------------------------------------------------------------------------

  /** STATFS: the numbers of the filesystem holding the delta (where writes go). */
  async statfs(): Promise<StatfsReply> {
    const s = await statfs(this.#statfsPath);
    const quota = this.#delta.quota;
    const host = {
      bsize: s.bsize,
      frsize: s.bsize,
      blocks: s.blocks,
      bfree: s.bfree,
      bavail: s.bavail,
      files: s.files,
      ffree: s.ffree,
      favail: s.ffree,
      namemax: 255,
    };
    // With a quota, `df` inside shows the quota as the disk: its size and what is left of it.
    return quota === null ? host : quotaStatfs(quota, host);
  }

  /** ACCESS (only sent without default_permissions): answered from the rules, not only mode bits. */
  async access(ino: number, mask: number, caller: Caller): Promise<void> {
    const node = this.#node(ino);
    const path = this.#pathOrStale(ino);
    const permission = this.#visiblePermission(path, node.isDir, caller, 'access');
    const effective: Permission = node.isDir && permission === 'none' ? 'view' : permission;
    const wantsWrite = (mask & constants.W_OK) !== 0;
    const wantsRead = (mask & constants.R_OK) !== 0 && !node.isDir;
    if ((wantsWrite && effective !== 'write') || (wantsRead && !atLeast(effective, 'read'))) {
      throw this.#deny('access', path, permission, 'EACCES', caller);
    }
    if ((mask & constants.X_OK) !== 0) {
      const attr = await this.getattr(ino, caller);
      if ((attr.mode & 0o111) === 0) throw new FsError('EACCES', `${path} is not executable`);
    }
  }

  /** SETXATTR/REMOVEXATTR: need write (contract §2); storing attributes is not supported (ENOTSUP). */
  xattrSet(ino: number, name: string, caller: Caller): never {
    const path = this.#pathOrStale(ino);
    const permission = this.#visiblePermission(path, this.#node(ino).isDir, caller, 'setxattr');
    if (permission !== 'write') throw this.#deny('setxattr', path, permission, 'EACCES', caller);
    throw new FsError('ENOTSUP', `${path}: extended attributes (${name}) are not supported`);
  }

  // --- whole-file access for the control plane (library readFile/writeFile) ---------------------------

  /** Reads a whole file as the sandbox would: none => ENOENT, view => EACCES. */
  async readPath(path: string, caller: Caller): Promise<Buffer> {
    const permission = this.#rules.permissionOf(path);
    if (!atLeast(permission, 'read')) {
      throw this.#deny('readFile', path, permission, permission === 'none' ? 'ENOENT' : 'EACCES', caller);
    }
    const found = await this.#delta.lookup(path);
    if (found === null) throw new FsError('ENOENT', `${path} does not exist`);
    if (found.type !== 'file') throw new FsError('EISDIR', `${path} is not a regular file`);
    const handle = await this.#delta.openForRead(path);
    try {
      const data = await handle.readFile();
      this.#allow('readFile', path, permission, caller);
      return data;
    } finally {
      await handle.close();
    }
  }

  /** Writes a whole file into the delta as the sandbox would (write permission; parent must exist). */
  async writePath(path: string, data: Uint8Array, caller: Caller): Promise<void> {
    const permission = this.#rules.permissionOf(path);
    if (permission !== 'write') {
      throw this.#deny('writeFile', path, permission, permission === 'none' ? 'ENOENT' : 'EACCES', caller);
    }
    const found = await this.#delta.lookup(path);
    if (found !== null && found.type !== 'file') throw new FsError('EISDIR', `${path} is not a regular file`);
    const handle =
      found === null
        ? await this.#delta.create(path, 0o644, constants.O_RDWR | constants.O_TRUNC)
        : await this.#delta.openForWrite(path, constants.O_RDWR | constants.O_TRUNC);
    try {
      const quota = this.#delta.quota;
      if (quota !== null) {
        await quota.whenReady();
        const st = await handle.stat({ bigint: true });
        quota.check(st.ino, data.byteLength, path);
      }
      await handle.writeFile(data);
      if (quota !== null) quota.record(await handle.stat({ bigint: true }));
    } finally {
      await handle.close();
    }
    this.#allow('writeFile', path, permission, caller);
    // The kernel may hold this file's old pages or a negative entry for its name: drop them.
    await this.invalidateAll();
  }

  /**
   * Makes the kernel forget every cached attribute, page, dentry and listing (after rule changes, a
   * discard, or a write that did not come through the mount). Resolves when the kernel has them.
   */
  async invalidateAll(): Promise<void> {
    this.#generation++;
    this.#listings.clear();
    this.#readAhead.clear();
    this.handles.closeUnpinned();
    const invalidator = this.invalidator;
    if (invalidator === undefined) return;
    const pending: Promise<void>[] = [];
    for (const node of this.inodes.entries()) {
      pending.push(invalidator.inode(node.ino));
      if (node.parent !== 0) pending.push(invalidator.entry(node.parent, node.name));
      for (const link of node.links) pending.push(invalidator.entry(link.parent, link.name));
    }
    // Names that did not exist may exist now (discard, commit, writeFile): drop the negative entries too.
    for (const { parent, name } of this.#negatives.values()) pending.push(invalidator.entry(parent, name));
    this.#negatives.clear();
    await Promise.all(pending);
  }

  /** Closes host handles (unmount). */
  async close(): Promise<void> {
    await this.handles.closeAll();
  }

  // --- helpers ----------------------------------------------------------------------------------------

  #node(ino: number): Inode {
    const node = this.inodes.get(ino);
    if (node === undefined) throw new FsError('ESTALE', `inode ${ino} is not known`);
    return node;
  }

  #pathOrStale(ino: number): string {
    const path = this.inodes.pathOf(ino);
    if (path === null) throw new FsError('ENOENT', `inode ${ino} was removed`);
    return path;
  }

  #childPath(parent: number, name: string): string {
    const path = this.inodes.childPath(parent, name);
    if (path === null) throw new FsError('ENOENT', `directory inode ${parent} was removed`);
    return path;
  }

  /** The permission of a node that the kernel already holds; ENOENT if the rules now hide it. */
  #visiblePermission(path: string, isDir: boolean, caller: Caller, op: string): Permission {
    if (path === '/') {
      // The root is always there to list; only rules naming '/' exactly can raise it above view.
      const root = this.#rules.permissionOf('/');
      return root === 'none' ? 'view' : root;
    }
    const permission = this.#rules.permissionOf(path);
    if (permission === 'none' && !(isDir && this.#rules.isTraversable(path))) {
      throw this.#deny(op, path, permission, 'ENOENT', caller);
    }
    return permission;
  }

  /** A new entry at `name` in `parent` is allowed only where the rules say write (contract §2: else EACCES). */
  #creatable(parent: number, name: string, op: string, caller: Caller): string {
    const path = this.#childPath(parent, name);
    const permission = this.#rules.permissionOf(path);
    if (permission !== 'write') throw this.#deny(op, path, permission, 'EACCES', caller);
    return path;
  }

  /**
   * Removing or renaming away: none => ENOENT (it does not exist for the sandbox), view/read => EACCES. A
   * `none` directory kept traversable by an exception is listed, so it answers like a view one: EACCES.
   */
  #removable(path: string, op: string, caller: Caller, target?: string): void {
    const permission = this.#rules.permissionOf(path);
    if (permission === 'write') return;
    const errno = permission === 'none' && !this.#rules.isTraversable(path) ? 'ENOENT' : 'EACCES';
    throw this.#deny(op, path, permission, errno, caller, target);
  }

  /** Owner and mode of a new entry in directory `parent` (ownership.ts: set-gid directories). */
  async #newOwner(
    parent: number,
    caller: Caller,
    isDir: boolean,
    mode: number,
  ): Promise<{ readonly owner: Owner; readonly mode: number }> {
    const parentPath = this.inodes.pathOf(parent);
    const found = parentPath === null ? null : await this.#delta.lookup(parentPath);
    return newEntryOwner(
      caller,
      found === null ? null : { stat: found.stat, owner: this.#ownerOf(found) },
      isDir,
      mode,
    );
  }

  /** The owner shown for an entry: stored on upper entries, the sandbox owner for codebase ones. */
  #ownerOf(found: DeltaLookup): Owner {
    if (found.layer === 'lower') return { uid: this.#uid, gid: this.#gid };
    return { uid: Number(found.stat.uid), gid: Number(found.stat.gid) };
  }

  async #created(
    parent: number,
    name: string,
    path: string,
    caller: Caller,
    op: string,
    made: { readonly owner: Owner; readonly mode: number },
  ): Promise<EntryReply> {
    let found = await this.#mustFind(path);
    const { owner } = made;
    if (Number(found.stat.uid) !== owner.uid || Number(found.stat.gid) !== owner.gid) {
      // The worker made it as itself: hand it to the caller. The mode again after the chown, which
      // clears set-id bits on the host (a symlink has no mode of its own).
      await this.#delta.setattr(path, {
        uid: owner.uid,
        gid: owner.gid,
        ...(found.type === 'symlink' ? {} : { mode: made.mode }),
      });
      found = await this.#mustFind(path);
    }
    const node = this.inodes.remember(parent, name, found.type === 'directory');
    this.#forgetListing(parent);
    this.#allow(op, path, 'write', caller);
    return this.#entry(node, path, found, 'write');
  }

  async #mustFind(path: string): Promise<DeltaLookup> {
    const found = await this.#delta.lookup(path);
    if (found === null) throw new FsError('ENOENT', `${path} no longer exists`);
    return found;
  }

  #entry(node: Inode, path: string, found: DeltaLookup, permission: Permission, ttl = this.#ttl): EntryReply {
    return {
      ino: node.ino,
      attr: this.#attr(node, path, found, permission),
      entryTimeout: ttl,
      attrTimeout: ttl,
    };
  }

  #attr(node: Inode, path: string, found: DeltaLookup, permission: Permission): FuseAttr {
    if (node.stIno === 0) node.stIno = stableIno(found.lower, found.upper, node.ino);
    if (found.layer === 'lower' && found.type === 'file') this.#checkLowerVersion(node, found);
    let effective = permission;
    if (found.type === 'directory') {
      // A directory shown only for the exceptions inside it can be listed; one that may receive writes
      // needs its w bit so the kernel forwards creates to us (write-hints.ts).
      if (effective === 'none') effective = 'view';
      if (effective !== 'write' && this.#hints.mayWriteInside(path)) effective = 'write';
    }
    const owner = this.#ownerOf(found);
    return toAttr(found.stat, { ino: node.stIno, permission: effective, uid: owner.uid, gid: owner.gid });
  }

  #checkLowerVersion(node: Inode, found: DeltaLookup): void {
    const st = found.stat;
    const version = `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    const previous = this.#lowerVersions.get(node.ino);
    this.#lowerVersions.set(node.ino, version);
    if (previous === undefined || previous === version) return;
    this.handles.drop(node.ino);
    // Fire and forget: the notification never blocks this reply (see Invalidator).
    if (this.invalidator !== undefined) void this.invalidator.inode(node.ino);
  }

  async #orphanAttr(node: Inode): Promise<FuseAttr> {
    if (node.isDir) {
      // A removed directory still someone's cwd: empty, no links, as a disk reports it.
      const now = BigInt(Date.now()) * 1_000_000n;
      return {
        ino: node.stIno,
        mode: S_IFDIR | 0o755,
        nlink: 0,
        uid: this.#uid,
        gid: this.#gid,
        rdev: 0,
        size: 0,
        blocks: 0,
        blksize: 4096,
        atimeNs: now,
        mtimeNs: now,
        ctimeNs: now,
      };
    }
    const handle = this.handles.get(node.ino, false);
    if (handle === undefined) throw new FsError('ENOENT', `inode ${node.ino} was removed`);
    const stat = await handle.stat({ bigint: true });
    return toAttr(stat, {
      ino: node.stIno,
      permission: 'write',
      uid: Number(stat.uid),
      gid: Number(stat.gid),
    });
  }

  async #orphanSetattr(
    node: Inode,
    changes: SetattrChanges,
    atime: bigint | 'now' | undefined,
    mtime: bigint | 'now' | undefined,
    caller: Caller,
  ): Promise<FuseAttr> {
    const handle = this.handles.get(node.ino, true);
    if (handle === undefined) throw new FsError('ENOENT', `inode ${node.ino} was removed`);
    if (changes.uid !== undefined || changes.gid !== undefined) {
      const st = await handle.stat({ bigint: true });
      checkChown(caller, { uid: Number(st.uid), gid: Number(st.gid) }, changes.uid, changes.gid);
      await handle.chown(changes.uid ?? -1, changes.gid ?? -1);
    }
    if (changes.mode !== undefined) await handle.chmod(changes.mode & 0o7777);
    if (changes.size !== undefined) hostIo.ftruncate(handle.fd, changes.size);
    if (atime !== undefined || mtime !== undefined) {
      const [aSec, aNsec] = timespec(atime);
      const [mSec, mNsec] = timespec(mtime);
      hostIo.futimens(handle.fd, aSec, aNsec, mSec, mNsec);
    }
    return this.#orphanAttr(node);
  }

  /** The host handle for a data op, after the permission check; opening for write copies up. */
  async #handle(ino: number, needWrite: boolean, caller: Caller, op: 'read' | 'write'): Promise<HostFile> {
    const cached = this.handles.get(ino, needWrite);
    const path = this.inodes.pathOf(ino);
    if (path === null) {
      // Unlinked but still open in the sandbox: only the handle we kept serves it.
      if (cached === undefined) throw new FsError('ENOENT', `inode ${ino} was removed`);
      return cached;
    }
    const permission = this.#rules.permissionOf(path);
    const needed: Permission = needWrite ? 'write' : 'read';
    if (!atLeast(permission, needed)) {
      throw this.#deny(op, path, permission, permission === 'none' ? 'ENOENT' : 'EACCES', caller);
    }
    if (cached !== undefined) return cached;
    let handle: HostFile;
    if (needWrite) {
      const writable = await this.#delta.openForWrite(path, constants.O_RDWR);
      this.handles.set(ino, writable, true);
      handle = writable;
    } else {
      handle = await this.#delta.openReadHandle(path);
      this.handles.set(ino, handle, false);
    }
    this.#allow(op, path, permission, caller);
    return handle;
  }

  /**
   * No OPEN reaches us, so we cannot know whether a file losing its name is open: keep a host handle for
   * its node (one fd, until the kernel forgets the node), read-write when it is the sandbox's own file.
   * Best effort: failing only affects a later access through a descriptor opened before.
   */
  async #keepOpenable(node: Inode, path: string): Promise<void> {
    if (node.isDir) return;
    if (this.handles.get(node.ino, true) === undefined) {
      const kept = await this.#delta.openToKeep(path).catch(() => undefined);
      if (kept?.writable === true) this.handles.set(node.ino, kept.handle, true);
      else if (kept !== undefined) this.handles.set(node.ino, kept.handle, false);
    }
    this.handles.pin(node.ino);
  }

  /**
   * Runs the synchronous `io` on the host fd of a data op. The fd is read from its handle and used in
   * ONE synchronous step, after the last await: a handle's `fd` turns -1 the moment its close begins
   * (HandleCache.drop; FileHandle and RawFile alike), and the number may be reused by the next open at
   * once (RawFile closes synchronously), so an fd carried across an await could name another file (other
   * requests run in between). If a drop won the race, the handle is looked up again.
   * Data ops run synchronously on purpose: one FUSE request is served at a time from the JS thread
   * anyway, and a thread-pool round trip costs more than a page-cache copy of 128 KiB.
   */
  async #withFd<T>(
    ino: number,
    needWrite: boolean,
    caller: Caller,
    op: 'read' | 'write',
    io: (fd: number) => T,
  ): Promise<T> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const handle = await this.#handle(ino, needWrite, caller, op);
      const fd = handle.fd; // no await from here to the syscall
      if (fd !== -1) return io(fd);
    }
    throw new FsError('EIO', `inode ${ino}: its host file kept being closed during a ${op}`);
  }

  /** Drops a directory's cached listing (its entries changed), and ReadAhead's position in it. */
  #forgetListing(dir: number): void {
    this.#listings.delete(dir);
    this.#readAhead.forget(dir);
  }

  #forgetHandleUnlessWritable(ino: number): void {
    if (this.handles.get(ino, true) === undefined) this.handles.drop(ino);
  }

  async #list(ino: number, path: string): Promise<DirEntryOut[]> {
    const node = this.#node(ino);
    const out: DirEntryOut[] = [
      { name: '.', ino: node.stIno, mode: S_IFDIR, nextOffset: 1 },
      { name: '..', ino: ROOT_INO, mode: S_IFDIR, nextOffset: 2 },
    ];
    for (const entry of await this.#delta.readdir(path)) {
      const child = path === '/' ? `/${entry.name}` : `${path}/${entry.name}`;
      const isDir = entry.type === 'directory';
      const permission = this.#rules.permissionOf(child);
      if (permission === 'none' && !(isDir && this.#rules.isTraversable(child))) continue;
      const known = this.inodes.child(ino, entry.name);
      out.push({
        name: entry.name,
        ino: known !== undefined && known.stIno !== 0 ? known.stIno : syntheticIno(child),
        mode: typeBits(entry.type),
        nextOffset: out.length + 1,
      });
    }
    return out;
  }

  /** After a move, the kernel must re-ask for attributes of the node and everything below it. */
  #invalidateTree(node: Inode): void {
    const invalidator = this.invalidator;
    if (invalidator === undefined) return;
    const nodes = [node, ...(node.isDir ? this.inodes.descendants(node.ino) : [])];
    for (const n of nodes) void invalidator.inode(n.ino);
  }

  #deny(
    op: string,
    path: string,
    permission: Permission,
    errno: string,
    caller: Caller,
    target?: string,
  ): FsError {
    this.#audit.record({
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
  #auditKernelDenial(path: string, permission: 'read' | 'view', caller: Caller): void {
    const pending = pendingAccess(caller.pid);
    if (pending === null) return;
    if (pending.access === 'write' || permission === 'view') {
      this.#audit.record({
        op: pending.op,
        path,
        decision: 'deny',
        permission,
        errno: 'EACCES',
        pid: caller.pid,
      });
    }
  }

  #allow(op: string, path: string, permission: Permission, caller: Caller, target?: string): void {
    if (!this.#audit.allowed) return;
    this.#audit.record({
      op,
      path,
      ...(target === undefined ? {} : { target }),
      decision: 'allow',
      permission,
      pid: caller.pid,
    });
  }
}

function typeBits(type: string): number {
  switch (type) {
    case 'directory':
      return S_IFDIR;
    case 'symlink':
      return constants.S_IFLNK;
    case 'fifo':
      return S_IFIFO;
    case 'file':
      return constants.S_IFREG;
    default:
      return 0; // DT_UNKNOWN: the kernel/tools stat the entry
  }
}

/** A stable, non-zero d_ino for entries the kernel has not looked up yet (FNV-1a of the path). */
function syntheticIno(path: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) {
    hash ^= path.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash === 0 ? 1 : hash;
}
