// The bytes of a READDIRPLUS answer: one struct fuse_direntplus per entry (fuse_entry_out, then
// fuse_dirent and the name, padded to 8 bytes), exactly what libfuse's fuse_add_direntry_plus writes and
// the binding's replyDirentsPlus packs. Packed here, not in the binding, so the worker can keep an answer
// as bytes and hand it to the kernel again with only its timeouts rewritten (listing-replay.ts); the
// bytes go out through replyBuf.
import type { DirEntryOut, EntryReply } from './types.js';

/** sizeof(struct fuse_entry_out) + sizeof(struct fuse_dirent) without the name. */
const HEAD = 128 + 24;
/** Offsets in a record: fuse_entry_out's timeouts (u64 seconds, u32 nanoseconds each), then fuse_attr. */
export const ENTRY_VALID = 16;
export const ATTR_VALID = 24;
export const ENTRY_VALID_NSEC = 32;
export const ATTR_VALID_NSEC = 36;
const ATTR = 40;
const DIRENT = 128;
const TWO32 = 2 ** 32;
const NS = 1_000_000_000n;

/** A directory entry with its LOOKUP answer (absent: '.', '..', or a name gone or hidden meanwhile). */
export interface DirEntryPlusOut extends DirEntryOut {
  readonly entry?: EntryReply;
}

export interface PackedDirents {
  readonly bytes: Buffer;
  /** Byte offset of each record that carries attributes (a kernel lookup), in entry order. */
  readonly attrAt: readonly number[];
}

/**
 * Packs the entries (all of them: the caller kept only those that fit the kernel's buffer). Written
 * through 32- and 64-bit views of one zeroed buffer in the host's byte order (the kernel reads the
 * structs natively; records and their fields are 8- and 4-byte aligned), the names encoded in place: the
 * per-field Buffer writes and a Buffer per name cost the worker ~4 µs per entry, a third of a walk's
 * listing time.
 */
export function packDirentsPlus(entries: readonly DirEntryPlusOut[]): PackedDirents {
  const n = entries.length;
  const lengths = new Uint32Array(n);
  let total = 0;
  for (let i = 0; i < n; i++) {
    const length = Buffer.byteLength(entries[i]!.name, 'utf8');
    lengths[i] = length;
    total += (HEAD + length + 7) & ~7;
  }
  // Buffer.alloc never takes a slice of the shared pool: byteOffset 0, so the views below are aligned.
  const buf = Buffer.alloc(total); // zeroed: padding and absent attributes must not leak memory
  const u32 = new Uint32Array(buf.buffer, buf.byteOffset, total >>> 2);
  const i64 = new BigInt64Array(buf.buffer, buf.byteOffset, total >>> 3);
  const attrAt: number[] = [];
  let at = 0;
  for (let i = 0; i < n; i++) {
    const e = entries[i]!;
    const length = lengths[i]!;
    const entry = e.entry;
    if (entry !== undefined && entry.ino !== 0) {
      attrAt.push(at);
      u64(u32, at, entry.ino);
      // generation (at + 8) stays 0, as the binding sends it
      timeout(u32, at + ENTRY_VALID, at + ENTRY_VALID_NSEC, entry.entryTimeout);
      timeout(u32, at + ATTR_VALID, at + ATTR_VALID_NSEC, entry.attrTimeout);
      // fuse_attr: ino size blocks atime mtime ctime (u64) atimensec mtimensec ctimensec mode nlink uid gid
      // rdev blksize flags (u32)
      const a = entry.attr;
      const x = at + ATTR;
      u64(u32, x, a.ino);
      if (typeof a.size === 'bigint') i64[(x + 8) >>> 3] = BigInt.asIntN(64, a.size);
      else u64(u32, x + 8, a.size);
      u64(u32, x + 16, a.blocks);
      time(i64, u32, x + 24, x + 48, a.atimeNs);
      time(i64, u32, x + 32, x + 52, a.mtimeNs);
      time(i64, u32, x + 40, x + 56, a.ctimeNs);
      const w = x >>> 2;
      u32[w + 15] = a.mode;
      u32[w + 16] = a.nlink;
      u32[w + 17] = a.uid;
      u32[w + 18] = a.gid;
      u32[w + 19] = a.rdev;
      u32[w + 20] = a.blksize || 4096;
    }
    const d = at + DIRENT;
    u64(u32, d, e.ino);
    u64(u32, d + 8, e.nextOffset);
    u32[(d + 16) >>> 2] = length;
    u32[(d + 20) >>> 2] = (e.mode & 0o170000) >>> 12;
    buf.write(e.name, d + 24, length, 'utf8');
    at += (HEAD + length + 7) & ~7;
  }
  return { bytes: buf, attrAt };
}

/** The length of the packed record at `at` (read from its name length). */
export function recordLength(buf: Buffer, at: number): number {
  return (HEAD + buf.readUInt32LE(at + DIRENT + 16) + 7) & ~7;
}

/** Rewrites a packed record's two timeouts (seconds, fractional allowed); `at` is 4-byte aligned. */
export function setTimeouts(buf: Buffer, at: number, seconds: number): void {
  // a view of the record's first 40 bytes: a replayed answer may sit anywhere in its ArrayBuffer
  const u32 = new Uint32Array(buf.buffer, buf.byteOffset + at, ATTR >>> 2);
  timeout(u32, ENTRY_VALID, ENTRY_VALID_NSEC, seconds);
  timeout(u32, ATTR_VALID, ATTR_VALID_NSEC, seconds);
}

/** A non-negative integer below 2^64 that is a safe JS number, at byte `at` (4-byte aligned). */
function u64(u32: Uint32Array, at: number, v: number): void {
  const w = at >>> 2;
  u32[w] = v % TWO32;
  u32[w + 1] = Math.floor(v / TWO32);
}

/** A timeout as the kernel's (u64 seconds, u32 nanoseconds), as libfuse's calc_timeout_sec/nsec do. */
function timeout(u32: Uint32Array, secAt: number, nsecAt: number, t: number): void {
  if (!(t > 0)) {
    u32[secAt >>> 2] = 0;
    u32[(secAt >>> 2) + 1] = 0;
    u32[nsecAt >>> 2] = 0;
    return;
  }
  const whole = Math.floor(t);
  u64(u32, secAt, Math.min(whole, 0xffffffff));
  u32[nsecAt >>> 2] = Math.min(Math.floor((t - whole) * 1e9), 999_999_999);
}

/** Nanoseconds since the epoch as (s64 seconds, u32 nanoseconds), floored like a timespec. */
function time(i64: BigInt64Array, u32: Uint32Array, secAt: number, nsecAt: number, ns: bigint): void {
  let sec = ns / NS;
  let rest = ns - sec * NS;
  if (rest < 0n) {
    sec -= 1n;
    rest += NS;
  }
  i64[secAt >>> 3] = sec;
  u32[nsecAt >>> 2] = Number(rest);
}
