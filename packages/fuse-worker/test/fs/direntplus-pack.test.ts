// The READDIRPLUS answer's bytes, read back as the kernel reads them (struct fuse_direntplus: fuse_entry_out,
// fuse_dirent, the name padded to 8 bytes, in the host's byte order): every field where the kernel looks
// for it, 64-bit sizes and pre-1970 / post-2038 times exact, padding and absent attributes zero.
import { endianness } from 'node:os';
import { describe, expect, it } from 'vitest';
import { packDirentsPlus, recordLength, setTimeouts } from '../../src/fs/direntplus-pack.js';
import type { DirEntryPlusOut } from '../../src/fs/direntplus-pack.js';

const LE = endianness() === 'LE';
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;

function reader(buf: Buffer): {
  u32: (at: number) => number;
  u64: (at: number) => bigint;
  i64: (at: number) => bigint;
} {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.length);
  return {
    u32: (at) => view.getUint32(at, LE),
    u64: (at) => view.getBigUint64(at, LE),
    i64: (at) => view.getBigInt64(at, LE),
  };
}

const file = (name: string, i: number): DirEntryPlusOut => ({
  name,
  ino: 1000 + i,
  nextOffset: i + 1,
  mode: S_IFREG | 0o644,
  entry: {
    ino: 2 ** 40 + i,
    entryTimeout: 1.25,
    attrTimeout: 2,
    attr: {
      ino: 2 ** 45 + i,
      mode: S_IFREG | 0o640,
      nlink: 3,
      uid: 4_000_000_000,
      gid: 1000,
      rdev: 0,
      size: 5n * 2n ** 32n + 7n,
      blocks: 2 ** 33,
      blksize: 0,
      atimeNs: -300_000_000_250_000_000n,
      mtimeNs: 4_200_000_000_500_000_000n,
      ctimeNs: 1_700_000_000_000_000_001n,
    },
  },
});

describe('packDirentsPlus', () => {
  it('writes each record where the kernel reads it, names in UTF-8 padded with zeros', () => {
    const entries: DirEntryPlusOut[] = [
      { name: '.', ino: 7, nextOffset: 1, mode: S_IFDIR },
      file('é.txt', 1),
      { name: 'plain', ino: 9, nextOffset: 3, mode: S_IFDIR | 0o755 },
      file('x'.repeat(255), 3),
    ];
    const { bytes, attrAt } = packDirentsPlus(entries);
    const r = reader(bytes);
    let at = 0;
    const seen: number[] = [];
    for (const e of entries) {
      const name = Buffer.from(e.name);
      expect(recordLength(bytes, at)).toBe((152 + name.length + 7) & ~7);
      // fuse_dirent at +128: ino off namelen type, then the name and zero padding
      expect(r.u64(at + 128)).toBe(BigInt(e.ino));
      expect(r.u64(at + 136)).toBe(BigInt(e.nextOffset));
      expect(r.u32(at + 144)).toBe(name.length);
      expect(r.u32(at + 148)).toBe((e.mode & 0o170000) >>> 12);
      expect(bytes.subarray(at + 152, at + 152 + name.length).equals(name)).toBe(true);
      const end = at + recordLength(bytes, at);
      expect(bytes.subarray(at + 152 + name.length, end).every((b) => b === 0)).toBe(true);
      if (e.entry === undefined) {
        expect(bytes.subarray(at, at + 128).every((b) => b === 0)).toBe(true);
      } else {
        seen.push(at);
        const a = e.entry.attr;
        expect(r.u64(at)).toBe(BigInt(e.entry.ino));
        expect([r.u64(at + 16), r.u32(at + 32), r.u64(at + 24), r.u32(at + 36)]).toEqual([
          1n,
          250_000_000,
          2n,
          0,
        ]);
        expect([r.u64(at + 40), r.u64(at + 48), r.u64(at + 56)]).toEqual([
          BigInt(a.ino),
          a.size,
          BigInt(a.blocks),
        ]);
        // times: s64 seconds floored, u32 nanoseconds
        expect([r.i64(at + 64), r.u32(at + 88)]).toEqual([-300_000_001n, 750_000_000]);
        expect([r.i64(at + 72), r.u32(at + 92)]).toEqual([4_200_000_000n, 500_000_000]);
        expect([r.i64(at + 80), r.u32(at + 96)]).toEqual([1_700_000_000n, 1]);
        expect([r.u32(at + 100), r.u32(at + 104), r.u32(at + 108), r.u32(at + 112)]).toEqual([
          a.mode,
          3,
          4_000_000_000,
          1000,
        ]);
        // rdev, then blksize (0 becomes 4096), flags
        expect([r.u32(at + 116), r.u32(at + 120), r.u32(at + 124)]).toEqual([0, 4096, 0]);
      }
      at = end;
    }
    expect(at).toBe(bytes.length);
    expect(attrAt).toEqual(seen);
  });

  it('setTimeouts rewrites both timeouts of a record in a copy, wherever the copy sits', () => {
    const { bytes, attrAt } = packDirentsPlus([file('a', 0), file('bb', 1)]);
    // a copy at an offset in a larger buffer, as a replayed answer may be
    const holder = Buffer.alloc(bytes.length + 8);
    const copy = holder.subarray(8);
    bytes.copy(copy);
    setTimeouts(copy, attrAt[1]!, 0.5);
    const r = reader(copy);
    expect([
      r.u64(attrAt[1]! + 16),
      r.u32(attrAt[1]! + 32),
      r.u64(attrAt[1]! + 24),
      r.u32(attrAt[1]! + 36),
    ]).toEqual([0n, 500_000_000, 0n, 500_000_000]);
    // the first record and the original are untouched
    expect(copy.subarray(0, attrAt[1]).equals(bytes.subarray(0, attrAt[1]))).toBe(true);
    expect(reader(bytes).u32(attrAt[1]! + 32)).toBe(250_000_000);
  });
});
