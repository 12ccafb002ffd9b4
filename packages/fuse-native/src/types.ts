// The binding's public types: what handlers receive and answer with, the mount's options and what INIT
// negotiated. Inode numbers and file handles are JS doubles (exact up to 2^53). File offsets and sizes are
// exact 64-bit values: a number up to Number.MAX_SAFE_INTEGER, a bigint above it. Times are bigint
// nanoseconds since the epoch (full timespecs cross the binding: seconds and nanoseconds, no rounding).
// File names arrive as Buffers (raw bytes: names need not be UTF-8); xattr names as strings. Anything
// accepting a name also accepts a string (encoded as UTF-8).
import type { Req } from './req.js';

export interface Attr {
  ino: number;
  mode: number;
  nlink?: number;
  uid?: number;
  gid?: number;
  rdev?: number;
  /** exact: a bigint for sizes above 2^53 - 1 */
  size?: number | bigint;
  /** 512-byte blocks; defaults to ceil(size / 512) */
  blocks?: number;
  blksize?: number;
  /** nanoseconds since the epoch (negative before 1970); sent as an exact timespec */
  atimeNs?: bigint;
  mtimeNs?: bigint;
  ctimeNs?: bigint;
}

export interface EntryParam {
  /** 0 = negative entry: the kernel caches "does not exist" for entryTimeout seconds */
  ino: number;
  generation?: number;
  attr: Attr;
  /** seconds */
  entryTimeout?: number;
  /** seconds */
  attrTimeout?: number;
}

export interface OpenParam {
  fh?: number;
  directIo?: boolean;
  keepCache?: boolean;
  nonseekable?: boolean;
}

export interface Dirent {
  name: Buffer | string;
  ino: number;
  /** only the file type bits (S_IFMT) are used */
  mode: number;
  /** the offset the kernel passes back to continue after this entry */
  nextOffset: number;
}

export interface Statfs {
  bsize?: number;
  frsize?: number;
  blocks?: number;
  bfree?: number;
  bavail?: number;
  files?: number;
  ffree?: number;
  favail?: number;
  fsid?: number;
  flag?: number;
  namemax?: number;
}

export interface SetattrChanges {
  mode?: number;
  uid?: number;
  gid?: number;
  /** a number up to 2^53 - 1, a bigint above */
  size?: number | bigint;
  /** nanoseconds since the epoch (exact, from the request's timespec), or 'now' (UTIME_NOW) */
  atime?: bigint | 'now';
  mtime?: bigint | 'now';
}

export interface DirentPlus extends Dirent {
  /** the entry's attributes as a LOOKUP would answer them; absent or ino 0 = none (not counted) */
  entry?: EntryParam;
}

/** What a handler returns: nothing, or a promise whose rejection answers EIO. */
export type HandlerResult = void | Promise<void>;

/**
 * Handlers are methods on a plain object. A missing handler is answered while the request is
 * decoded, without entering JS: ENOSYS for most ops (OPEN => kernel no_open, OPENDIR => no_opendir and
 * the readdir cache, FLUSH => no_flush), success for release/releasedir, a default statfs,
 * nothing for forget. A handler that throws or returns a rejected promise gets EIO (if it had
 * not answered) and the error goes to options.onError.
 */
export interface LowLevelHandlers {
  lookup?(req: Req, parent: number, name: Buffer): HandlerResult;
  /** no reply; FORGET_MULTI batches arrive as one call per inode */
  forget?(ino: number, nlookup: number): void;
  getattr?(req: Req, ino: number, fh: number | undefined): HandlerResult;
  setattr?(req: Req, ino: number, changes: SetattrChanges, fh: number | undefined): HandlerResult;
  readlink?(req: Req, ino: number): HandlerResult;
  mknod?(req: Req, parent: number, name: Buffer, mode: number, rdev: number): HandlerResult;
  mkdir?(req: Req, parent: number, name: Buffer, mode: number): HandlerResult;
  unlink?(req: Req, parent: number, name: Buffer): HandlerResult;
  rmdir?(req: Req, parent: number, name: Buffer): HandlerResult;
  symlink?(req: Req, target: Buffer, parent: number, name: Buffer): HandlerResult;
  rename?(req: Req, parent: number, name: Buffer, newparent: number, newname: Buffer): HandlerResult;
  link?(req: Req, ino: number, newparent: number, newname: Buffer): HandlerResult;
  open?(req: Req, ino: number, flags: number): HandlerResult;
  /** offset: a number up to 2^53 - 1, a bigint above (never rounded) */
  read?(req: Req, ino: number, size: number, offset: number | bigint, fh: number): HandlerResult;
  /** data is valid until req.replyWrite (which detaches it) or until it is garbage; offset as for read */
  write?(req: Req, ino: number, data: Buffer, offset: number | bigint, fh: number): HandlerResult;
  flush?(req: Req, ino: number, fh: number): HandlerResult;
  release?(req: Req, ino: number, fh: number): HandlerResult;
  fsync?(req: Req, ino: number, datasync: boolean, fh: number): HandlerResult;
  opendir?(req: Req, ino: number, flags: number): HandlerResult;
  readdir?(req: Req, ino: number, size: number, offset: number, fh: number): HandlerResult;
  /** READDIRPLUS (asked for only with this handler and features.readdirplus): answer with replyDirentsPlus */
  readdirplus?(req: Req, ino: number, size: number, offset: number, fh: number): HandlerResult;
  releasedir?(req: Req, ino: number, fh: number): HandlerResult;
  fsyncdir?(req: Req, ino: number, datasync: boolean, fh: number): HandlerResult;
  statfs?(req: Req, ino: number): HandlerResult;
  setxattr?(req: Req, ino: number, name: string, value: Buffer, flags: number): HandlerResult;
  getxattr?(req: Req, ino: number, name: string, size: number): HandlerResult;
  listxattr?(req: Req, ino: number, size: number): HandlerResult;
  removexattr?(req: Req, ino: number, name: string): HandlerResult;
  access?(req: Req, ino: number, mask: number): HandlerResult;
  create?(req: Req, parent: number, name: Buffer, mode: number, flags: number): HandlerResult;
  /**
   * fallocate(2) on an open file (FUSE_FALLOCATE): mode is FALLOC_FL_* (0 = allocate, 1 = KEEP_SIZE,
   * 2 = PUNCH_HOLE, ...); offset and length exact as for read. Answer with replyErr (0 = done). Without
   * this handler the binding answers ENOSYS, the kernel stops asking and fallocate(2) fails EOPNOTSUPP.
   */
  fallocate?(
    req: Req,
    ino: number,
    mode: number,
    offset: number | bigint,
    length: number | bigint,
    fh: number | undefined,
  ): HandlerResult;
}

export interface LowLevelOptions {
  /** [A-Za-z0-9_.:@+/-]{1,128}; shows in /proc/self/mountinfo */
  fsname?: string;
  subtype?: string;
  allowOther?: boolean;
  defaultPermissions?: boolean;
  /** accepted for compatibility; libfuse3 always allows big writes */
  bigWrites?: boolean;
  /** bytes per WRITE (and, with max_pages, per READ) request; default and maximum 1 MiB */
  maxWrite?: number;
  /** protocol features to ask for; each is granted only if the kernel offers it (see ConnInfo.features) */
  features?: FeatureRequest;
  maxRead?: number;
  /** libfuse's -o debug trace on stderr */
  debug?: boolean;
  /** more -o options, each /^[A-Za-z0-9_]+(=[A-Za-z0-9_.:@+/-]*)?$/ */
  extraOptions?: string[];
  /** handler errors; default console.error */
  onError?: (err: unknown) => void;
}

export interface FeatureRequest {
  /** default false: the kernel caches writes and sends them later in max_write chunks */
  writebackCache?: boolean;
  /** default true (used only with a readdirplus handler): directory listings carry attributes */
  readdirplus?: boolean;
  /** default true: concurrent LOOKUP/READDIR in one directory */
  parallelDirops?: boolean;
  /** default false: the kernel caches symlink targets in its page cache */
  cacheSymlinks?: boolean;
  /** default false */
  asyncDio?: boolean;
}

export interface ConnFeatures {
  /** READ/WRITE requests above 128 KiB (protocol 7.28) */
  maxPages: boolean;
  writebackCache: boolean;
  readdirplus: boolean;
  parallelDirops: boolean;
  cacheSymlinks: boolean;
  asyncDio: boolean;
  /** the kernel takes ENOSYS to OPEN/OPENDIR as "never ask again" and there is no handler */
  noOpen: boolean;
  noOpendir: boolean;
  /** always false: libfuse 3.14 cannot negotiate FUSE passthrough */
  passthrough: boolean;
}

export interface ConnInfo {
  /** the protocol version the kernel offered (libfuse 3.14 itself speaks up to 7.36) */
  protoMajor: number;
  protoMinor: number;
  maxWrite: number;
  maxReadahead: number;
  /** FUSE_CAP_* the kernel offered / the mount asked for */
  capable: number;
  want: number;
  libfuseVersion: string;
  features: ConnFeatures;
}

/** An exact 64-bit offset or length: a bigint, or a number that is a safe integer. */
export type Offset = number | bigint;
