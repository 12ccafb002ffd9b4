// Values crossing the binding exactly: 64-bit sizes in two halves, times as (seconds, nanoseconds) even
// before 1970, and setattr's changes.
import { describe, expect, it } from 'vitest';
import { putAttr, putTime, setattrChanges, writeTimeout } from '../src/encode.js';

describe('putAttr', () => {
  it('splits a size above 2^53 into exact 32-bit halves', () => {
    const d = new Float64Array(16);
    const size = 2n ** 53n + 1n;
    putAttr(d, { ino: 7, mode: 0o100644, size });
    expect(BigInt(d[15] as number) * 2n ** 32n + BigInt(d[6] as number)).toBe(size);
    expect(d[7]).toBe(Number((size + 511n) / 512n)); // blocks
    expect([d[0], d[1], d[2], d[8]]).toEqual([7, 0o100644, 1, 4096]); // ino mode nlink blksize
  });

  it('keeps a number size and given blocks', () => {
    const d = new Float64Array(16);
    putAttr(d, { ino: 1, mode: 0o40755, size: 5 * 2 ** 32 + 22, blocks: 3 });
    expect([d[6], d[15], d[7]]).toEqual([22, 5, 3]);
  });
});

describe('putTime', () => {
  it('floors times before 1970 so the nanoseconds stay non-negative', () => {
    const d = new Float64Array(2);
    putTime(d, 0, -1n);
    expect([...d]).toEqual([-1, 999_999_999]);
    putTime(d, 0, 1_700_000_000_123_456_789n);
    expect([...d]).toEqual([1_700_000_000, 123_456_789]);
  });
});

describe('setattrChanges', () => {
  it('takes only the fields to_set names; UTIME_NOW as "now"', () => {
    const SIZE = 1 << 3;
    const ATIME = 1 << 4;
    const MTIME_NOW = 1 << 8;
    expect(setattrChanges(SIZE | ATIME | MTIME_NOW, 0o644, 1, 2, 2n ** 60n, 10, 5, 0, 0)).toEqual({
      size: 2n ** 60n,
      atime: 10_000_000_005n,
      mtime: 'now',
    });
    expect(setattrChanges(0, 0o644, 1, 2, 0, 0, 0, 0, 0)).toEqual({});
  });
});

describe('writeTimeout', () => {
  it('writes seconds and nanoseconds as libfuse does, and nothing for 0', () => {
    const buf = Buffer.alloc(12);
    writeTimeout(buf, 0, 8, 1.5);
    expect([buf.readUInt32LE(0), buf.readUInt32LE(4), buf.readUInt32LE(8)]).toEqual([1, 0, 500_000_000]);
    const zero = Buffer.alloc(12);
    writeTimeout(zero, 0, 8, 0);
    expect(zero.equals(Buffer.alloc(12))).toBe(true);
  });
});
