// Values on their way across the binding: attributes into the scratch area native/reply.c reads, 64-bit
// integers and timeouts into reply records, setattr's changes out of the request's fields.
import type { Attr, OpenParam, SetattrChanges } from './types.js';

const TWO32 = 4294967296;
const NS = 1000000000n;
const LOW32 = 0xffffffffn;

/** The FUSE_SET_ATTR_* bits setattr's `toSet` carries (fuse_lowlevel.h). */
const SET_MODE = 1 << 0;
const SET_UID = 1 << 1;
const SET_GID = 1 << 2;
const SET_SIZE = 1 << 3;
const SET_ATIME = 1 << 4;
const SET_MTIME = 1 << 5;
const SET_ATIME_NOW = 1 << 7;
const SET_MTIME_NOW = 1 << 8;

/** Open reply bits, as native/reply.c fill_open reads them. */
const OPEN_DIRECT_IO = 1;
const OPEN_KEEP_CACHE = 2;
const OPEN_NONSEEKABLE = 4;

/**
 * A time in nanoseconds since the epoch (any range) -> d[at] = seconds, d[at + 1] = nanoseconds
 * 0..999999999 (floored, so times before 1970 keep a non-negative tv_nsec).
 */
export function putTime(d: Float64Array, at: number, ns: bigint | undefined): void {
  if (ns === undefined || ns === 0n) {
    d[at] = 0;
    d[at + 1] = 0;
    return;
  }
  let sec = ns / NS;
  let rest = ns - sec * NS;
  if (rest < 0n) {
    sec -= 1n;
    rest += NS;
  }
  d[at] = Number(sec);
  d[at + 1] = Number(rest);
}

/**
 * attr -> d[0..15], the layout of scratch_to_stat() in native/reply.c: ino mode nlink uid gid rdev
 * sizeLow32 blocks blksize atimeSec atimeNsec mtimeSec mtimeNsec ctimeSec ctimeNsec sizeHigh32. Sizes cross
 * as two 32-bit halves and times as (seconds, nanoseconds): exact where one double would round.
 */
export function putAttr(d: Float64Array, a: Attr): void {
  d[0] = a.ino || 0;
  d[1] = a.mode || 0;
  d[2] = a.nlink === undefined ? 1 : a.nlink;
  d[3] = a.uid || 0;
  d[4] = a.gid || 0;
  d[5] = a.rdev || 0;
  const size = a.size || 0;
  if (typeof size === 'bigint') {
    d[6] = Number(size & LOW32);
    d[15] = Number((size >> 32n) & LOW32);
    d[7] = a.blocks === undefined ? Number((size + 511n) / 512n) : a.blocks;
  } else {
    d[6] = size % TWO32;
    d[15] = Math.floor(size / TWO32);
    d[7] = a.blocks === undefined ? Math.ceil(size / 512) : a.blocks;
  }
  d[8] = a.blksize || 4096;
  putTime(d, 9, a.atimeNs);
  putTime(d, 11, a.mtimeNs);
  putTime(d, 13, a.ctimeNs);
}

/** A name as the bytes the kernel gets: a string is encoded as UTF-8. */
export function toNameBuffer(name: Buffer | string): Buffer {
  return typeof name === 'string' ? Buffer.from(name) : name;
}

export function openBits(o: OpenParam): number {
  return (
    (o.directIo ? OPEN_DIRECT_IO : 0) |
    (o.keepCache ? OPEN_KEEP_CACHE : 0) |
    (o.nonseekable ? OPEN_NONSEEKABLE : 0)
  );
}

/** An unsigned integer below 2^53 as a little-endian u64. */
export function writeU64(buf: Buffer, at: number, v: number): void {
  buf.writeUInt32LE(v % TWO32, at);
  buf.writeUInt32LE(Math.floor(v / TWO32), at + 4);
}

/** Seconds as a signed 64-bit value (times before 1970 are negative). */
export function writeI64(buf: Buffer, at: number, v: number): void {
  buf.writeBigInt64LE(BigInt(v), at);
}

/**
 * A timeout in (fractional) seconds as the kernel's (u64 seconds, u32 nanoseconds), as libfuse's
 * calc_timeout_sec/nsec do.
 */
export function writeTimeout(buf: Buffer, secAt: number, nsecAt: number, t: number): void {
  if (!(t > 0)) return;
  const sec = Math.min(Math.floor(t), 0xffffffff);
  writeU64(buf, secAt, sec);
  buf.writeUInt32LE(Math.min(Math.floor((t - Math.floor(t)) * 1e9), 999999999), nsecAt);
}

/** setattr's fields as changes; times arrive as exact (seconds, nanoseconds) and leave as bigint ns. */
export function setattrChanges(
  toSet: number,
  mode: number,
  uid: number,
  gid: number,
  size: number | bigint,
  aSec: number,
  aNsec: number,
  mSec: number,
  mNsec: number,
): SetattrChanges {
  const c: SetattrChanges = {};
  if (toSet & SET_MODE) c.mode = mode;
  if (toSet & SET_UID) c.uid = uid;
  if (toSet & SET_GID) c.gid = gid;
  if (toSet & SET_SIZE) c.size = size;
  if (toSet & SET_ATIME_NOW) c.atime = 'now';
  else if (toSet & SET_ATIME) c.atime = BigInt(aSec) * NS + BigInt(aNsec);
  if (toSet & SET_MTIME_NOW) c.mtime = 'now';
  else if (toSet & SET_MTIME) c.mtime = BigInt(mSec) * NS + BigInt(mNsec);
  return c;
}
