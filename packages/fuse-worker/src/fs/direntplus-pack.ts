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

/** Packs the entries (all of them: the caller kept only those that fit the kernel's buffer). */
export function packDirentsPlus(entries: readonly DirEntryPlusOut[]): PackedDirents {
  const names = entries.map((e) => Buffer.from(e.name));
  let total = 0;
  for (const name of names) total += (HEAD + name.length + 7) & ~7;
  const buf = Buffer.alloc(total); // zeroed: padding and absent attributes must not leak memory
  const attrAt: number[] = [];
  let at = 0;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    const name = names[i]!;
    const entry = e.entry;
    if (entry !== undefined && entry.ino !== 0) {
      attrAt.push(at);
      u64(buf, at, entry.ino);
      // generation (at + 8) stays 0, as the binding sends it
      timeout(buf, at + ENTRY_VALID, at + ENTRY_VALID_NSEC, entry.entryTimeout);
      timeout(buf, at + ATTR_VALID, at + ATTR_VALID_NSEC, entry.attrTimeout);
      // fuse_attr: ino size blocks atime mtime ctime (u64) atimensec mtimensec ctimensec mode nlink uid gid
      // rdev blksize flags (u32)
      const a = entry.attr;
      const x = at + ATTR;
      u64(buf, x, a.ino);
      if (typeof a.size === 'bigint') buf.writeBigUInt64LE(a.size, x + 8);
      else u64(buf, x + 8, a.size);
      u64(buf, x + 16, a.blocks);
      time(buf, x + 24, x + 48, a.atimeNs);
      time(buf, x + 32, x + 52, a.mtimeNs);
      time(buf, x + 40, x + 56, a.ctimeNs);
      buf.writeUInt32LE(a.mode >>> 0, x + 60);
      buf.writeUInt32LE(a.nlink >>> 0, x + 64);
      buf.writeUInt32LE(a.uid >>> 0, x + 68);
      buf.writeUInt32LE(a.gid >>> 0, x + 72);
      buf.writeUInt32LE(a.rdev >>> 0, x + 76);
      buf.writeUInt32LE((a.blksize || 4096) >>> 0, x + 80);
    }
    const d = at + DIRENT;
    u64(buf, d, e.ino);
    u64(buf, d + 8, e.nextOffset);
    buf.writeUInt32LE(name.length, d + 16);
    buf.writeUInt32LE((e.mode & 0o170000) >>> 12, d + 20);
    name.copy(buf, d + 24);
    at += (HEAD + name.length + 7) & ~7;
  }
  return { bytes: buf, attrAt };
}

/** The length of the packed record at `at` (read from its name length). */
export function recordLength(buf: Buffer, at: number): number {
  return (HEAD + buf.readUInt32LE(at + DIRENT + 16) + 7) & ~7;
}

/** Rewrites a packed record's two timeouts (seconds, fractional allowed). */
export function setTimeouts(buf: Buffer, at: number, seconds: number): void {
  timeout(buf, at + ENTRY_VALID, at + ENTRY_VALID_NSEC, seconds);
  timeout(buf, at + ATTR_VALID, at + ATTR_VALID_NSEC, seconds);
}

/** A non-negative integer below 2^64 that is a safe JS number. */
function u64(buf: Buffer, at: number, v: number): void {
  buf.writeUInt32LE(v % TWO32, at);
  buf.writeUInt32LE(Math.floor(v / TWO32), at + 4);
}

/** A timeout as the kernel's (u64 seconds, u32 nanoseconds), as libfuse's calc_timeout_sec/nsec do. */
function timeout(buf: Buffer, secAt: number, nsecAt: number, t: number): void {
  if (!(t > 0)) {
    buf.writeUInt32LE(0, secAt);
    buf.writeUInt32LE(0, secAt + 4);
    buf.writeUInt32LE(0, nsecAt);
    return;
  }
  const sec = Math.min(Math.floor(t), 0xffffffff);
  u64(buf, secAt, sec);
  buf.writeUInt32LE(Math.min(Math.floor((t - Math.floor(t)) * 1e9), 999_999_999), nsecAt);
}

/** Nanoseconds since the epoch as (s64 seconds, u32 nanoseconds), floored like a timespec. */
function time(buf: Buffer, secAt: number, nsecAt: number, ns: bigint): void {
  let sec = ns / NS;
  let rest = ns - sec * NS;
  if (rest < 0n) {
    sec -= 1n;
    rest += NS;
  }
  buf.writeBigInt64LE(sec, secAt);
  buf.writeUInt32LE(Number(rest), nsecAt);
}
