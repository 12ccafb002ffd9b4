// Directory listings packed in JS into the records the kernel reads (what libfuse's fuse_add_direntry and
// fuse_add_direntry_plus write): one Buffer per reply instead of one napi property read per field.
import { putAttr, toNameBuffer, writeI64, writeTimeout, writeU64 } from './encode.js';
import type { Dirent, DirentPlus } from './types.js';

/** sizeof(struct fuse_dirent) without the name */
const DIRENT_HEAD = 24;
/** sizeof(struct fuse_entry_out) + sizeof(struct fuse_dirent) without the name */
const DIRENTPLUS_HEAD = 128 + DIRENT_HEAD;

/** A record's size: header and name, padded to 8 bytes. */
const recordSize = (head: number, nameLength: number): number => (head + nameLength + 7) & ~7;

/** A packed reply: the records of the first `count` entries. */
export interface Packed {
  buf: Buffer;
  count: number;
}

/** The names of the leading entries whose records fit in `budget` bytes. */
function fitting(entries: readonly Dirent[], head: number, budget: number): Buffer[] {
  const names: Buffer[] = [];
  let total = 0;
  for (const entry of entries) {
    const name = toNameBuffer(entry.name);
    const rec = recordSize(head, name.length);
    if (total + rec > budget) break;
    names.push(name);
    total += rec;
  }
  return names;
}

/** struct fuse_dirent: ino off (u64) namelen type (u32) name. */
function writeDirent(buf: Buffer, at: number, e: Dirent, name: Buffer): void {
  writeU64(buf, at, e.ino || 0);
  writeU64(buf, at + 8, e.nextOffset);
  buf.writeUInt32LE(name.length, at + 16);
  buf.writeUInt32LE(((e.mode || 0) & 0o170000) >>> 12, at + 20);
  name.copy(buf, at + DIRENT_HEAD);
}

/** READDIR: as many entries as fit in `budget` bytes. */
export function packDirents(entries: readonly Dirent[], budget: number): Packed {
  const names = fitting(entries, DIRENT_HEAD, budget);
  const total = names.reduce((sum, name) => sum + recordSize(DIRENT_HEAD, name.length), 0);
  const buf = Buffer.alloc(total); // zeroed: padding bytes must not leak memory
  let at = 0;
  for (const [i, name] of names.entries()) {
    writeDirent(buf, at, entries[i] as Dirent, name);
    at += recordSize(DIRENT_HEAD, name.length);
  }
  return { buf, count: names.length };
}

/** READDIRPLUS: how many of these names fit in `budget` bytes, without building the records. */
export function fitDirentsPlus(names: readonly (string | Buffer)[], budget: number): number {
  let total = 0;
  let count = 0;
  for (; count < names.length; count++) {
    const rec = recordSize(DIRENTPLUS_HEAD, Buffer.byteLength(names[count] as string | Buffer));
    if (total + rec > budget) break;
    total += rec;
  }
  return count;
}

/**
 * READDIRPLUS: each record a struct fuse_direntplus (fuse_entry_out + fuse_dirent). An entry without
 * `entry.ino` carries no attributes (the kernel then neither caches it nor counts a lookup); every other
 * one counts as a LOOKUP the filesystem must later see FORGET for. `scratch` is the mount's scratch area,
 * through which attributes are encoded as replyAttr encodes them.
 */
export function packDirentsPlus(
  entries: readonly DirentPlus[],
  budget: number,
  scratch: Float64Array,
): Packed {
  const names = fitting(entries, DIRENTPLUS_HEAD, budget);
  const total = names.reduce((sum, name) => sum + recordSize(DIRENTPLUS_HEAD, name.length), 0);
  const buf = Buffer.alloc(total); // zeroed: padding and absent attributes must not leak memory
  let at = 0;
  for (const [i, name] of names.entries()) {
    const e = entries[i] as DirentPlus;
    const entry = e.entry;
    if (entry && entry.ino) {
      // fuse_entry_out: nodeid generation entry_valid attr_valid (u64) entry_valid_nsec attr_valid_nsec (u32)
      writeU64(buf, at, entry.ino);
      writeU64(buf, at + 8, entry.generation || 0);
      writeTimeout(buf, at + 16, at + 32, entry.entryTimeout || 0);
      writeTimeout(buf, at + 24, at + 36, entry.attrTimeout || 0);
      putAttr(scratch, entry.attr);
      writeAttr(buf, at + 40, scratch);
    }
    writeDirent(buf, at + 128, e, name);
    at += recordSize(DIRENTPLUS_HEAD, name.length);
  }
  return { buf, count: names.length };
}

/**
 * struct fuse_attr from the scratch layout (encode.ts putAttr): ino size blocks atime mtime ctime (u64)
 * atimensec mtimensec ctimensec mode nlink uid gid rdev blksize flags (u32).
 */
function writeAttr(buf: Buffer, a: number, d: Float64Array): void {
  const v = (i: number): number => d[i] as number;
  writeU64(buf, a, v(0));
  buf.writeUInt32LE(v(6), a + 8);
  buf.writeUInt32LE(v(15), a + 12);
  writeU64(buf, a + 16, v(7));
  writeI64(buf, a + 24, v(9));
  writeI64(buf, a + 32, v(11));
  writeI64(buf, a + 40, v(13));
  buf.writeUInt32LE(v(10), a + 48);
  buf.writeUInt32LE(v(12), a + 52);
  buf.writeUInt32LE(v(14), a + 56);
  buf.writeUInt32LE(v(1), a + 60);
  buf.writeUInt32LE(v(2), a + 64);
  buf.writeUInt32LE(v(3), a + 68);
  buf.writeUInt32LE(v(4), a + 72);
  buf.writeUInt32LE(v(5), a + 76);
  buf.writeUInt32LE(v(8), a + 80);
}
