// POSIX fidelity on a real mount (issue 13): exact 64-bit offsets, nanosecond times, owners and chown
// semantics, special files, set-id bits. Each test is what a user of git/tar/cp -a/make would check.
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene } from './helpers/fixture.js';

const FULL = [{ pattern: '**', permission: 'write' as const }];

describe('POSIX fidelity of the mount', () => {
  useMountHygiene();

  it('a write at offset >= 2^53 is exact or EFBIG, and never lands at the start of the file', async () => {
    const f = await mountFixture({ tree: { 'f.txt': 'hello world' }, rules: FULL });
    // python's os.pwrite is the syscall itself; dd seek= is what the issue reported.
    const py = [
      'import os',
      'fd = os.open("f.txt", os.O_RDWR)',
      'for off in (2**53, 2**53 + 1, 2**56, 2**60, 2**62):',
      '    try:',
      '        n = os.pwrite(fd, b"XY", off)',
      '        print(off, "wrote", n, os.pread(fd, 2, off))',
      '    except OSError as e:',
      '        print(off, "errno", e.errno)',
    ].join('\n');
    const r = await f.host(
      `python3 -c '${py}'; printf XY | dd of=f.txt bs=1 seek=9007199254740992 conv=notrunc status=none; echo dd=$?; cat f.txt`,
    );
    const lines = r.stdout.trim().split('\n');
    // The delta lives on ext4 here (max file size 16 TiB): the host refuses with EFBIG, exactly like a
    // native ext4 disk; a filesystem that stores them (tmpfs) would read back "XY" at the exact offset.
    for (const line of lines.slice(0, 5)) expect(line).toMatch(/^\d+ (errno 27|wrote 2 b'XY')$/);
    expect(lines.at(-1)).toBe('hello world');
    expect(lines).toContain('dd=1');
  });
});
