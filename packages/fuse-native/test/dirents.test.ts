// Directory records packed as the kernel reads them (struct fuse_dirent, struct fuse_direntplus).
import { describe, expect, it } from 'vitest';
import { fitDirentsPlus, packDirents, packDirentsPlus } from '../src/dirents.js';

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;

describe('packDirents', () => {
  it('packs ino, next offset, name length, type and name, each record padded to 8 bytes', () => {
    const { buf, count } = packDirents(
      [
        { name: 'a', ino: 2 ** 40 + 3, mode: S_IFREG, nextOffset: 1 },
        { name: Buffer.from('dir'), ino: 9, mode: S_IFDIR, nextOffset: 2 },
      ],
      4096,
    );
    expect(count).toBe(2);
    expect(buf.length).toBe(32 + 32);
    expect(buf.readBigUInt64LE(0)).toBe(2n ** 40n + 3n);
    expect(buf.readBigUInt64LE(8)).toBe(1n);
    expect([buf.readUInt32LE(16), buf.readUInt32LE(20)]).toEqual([1, 8]); // DT_REG
    expect(buf.subarray(24, 25).toString()).toBe('a');
    expect(buf.subarray(25, 32).equals(Buffer.alloc(7))).toBe(true); // zeroed padding
    expect([buf.readUInt32LE(32 + 16), buf.readUInt32LE(32 + 20)]).toEqual([3, 4]); // DT_DIR
  });

  it('stops at the budget', () => {
    const entries = [1, 2, 3].map((i) => ({ name: `f${i}`, ino: i, mode: S_IFREG, nextOffset: i }));
    expect(packDirents(entries, 64).count).toBe(2);
    expect(packDirents(entries, 31)).toEqual({ buf: Buffer.alloc(0), count: 0 });
  });
});

describe('packDirentsPlus', () => {
  it('carries the entry and its attributes, or zeros for an entry without attributes', () => {
    const scratch = new Float64Array(16);
    const attr = { ino: 5, mode: S_IFREG | 0o644, size: 10 };
    const { buf, count } = packDirentsPlus(
      [
        {
          name: 'x',
          ino: 5,
          mode: S_IFREG,
          nextOffset: 1,
          entry: { ino: 5, attr, entryTimeout: 2, attrTimeout: 1 },
        },
        { name: 'y', ino: 6, mode: S_IFREG, nextOffset: 2 },
      ],
      4096,
      scratch,
    );
    expect(count).toBe(2);
    expect(buf.length).toBe(2 * 160);
    expect(buf.readBigUInt64LE(0)).toBe(5n); // nodeid
    expect(buf.readBigUInt64LE(16)).toBe(2n); // entry_valid
    expect(buf.readBigUInt64LE(40 + 8)).toBe(10n); // attr.size
    expect(buf.readUInt32LE(40 + 60)).toBe(S_IFREG | 0o644); // attr.mode
    expect(buf.readBigUInt64LE(128)).toBe(5n); // dirent ino
    expect(buf.subarray(160, 160 + 128).equals(Buffer.alloc(128))).toBe(true); // no entry_out
    expect(buf.subarray(160 + 152, 160 + 153).toString()).toBe('y');
  });

  it('fits as many names as the records take', () => {
    expect(fitDirentsPlus(['a', 'b', 'c'], 320)).toBe(2);
    expect(fitDirentsPlus([], 320)).toBe(0);
  });
});
