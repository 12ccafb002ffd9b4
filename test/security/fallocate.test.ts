// posix_fallocate(fd, 0, 1 TiB) in the write area took 300 s and wrote 21.5 GB, because
// the mount had no fallocate and glibc wrote the file out. The worker implements fallocate (mode 0 and
// KEEP_SIZE; other modes EOPNOTSUPP) and answers ENOSPC at once beyond the disk quota.
import { describe, expect, it } from 'vitest';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';

const MiB = 1024 * 1024;

describe('fallocate', () => {
  useMountHygiene();

  it('posix_fallocate of 1 TiB fails with ENOSPC at once; small ranges allocate; other modes EOPNOTSUPP', async () => {
    const f = await mountFixture({
      tree: { 'output/.keep': '', 'src/a.txt': 'a\n' },
      rules: AGENT_SAFE,
      diskQuotaBytes: 64 * MiB,
    });
    const script = [
      'import os, errno',
      "fd = os.open('output/huge', os.O_WRONLY | os.O_CREAT, 0o644)",
      'try:',
      '    os.posix_fallocate(fd, 0, 1 << 40)',
      "    print('allocated')",
      'except OSError as e:',
      '    print(errno.errorcode[e.errno])',
      'print(os.fstat(fd).st_size, os.fstat(fd).st_blocks)',
    ].join('\n');
    const big = await f.sandbox('python3 -', { stdin: script });
    expect(big.stdout).toBe('ENOSPC\n0 0\n');
    const r = await f.sandbox(
      [
        'fallocate -l 1M output/a && stat -c %s output/a',
        'touch output/b && fallocate -n -l 2M output/b && stat -c "%s %b" output/b',
        'fallocate -p -o 0 -l 4096 output/a 2>&1; echo rc=$?',
        'fallocate -l 1M src/a.txt 2>&1; echo rc=$?',
      ].join('; '),
    );
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe(String(MiB));
    expect(lines[1]).toMatch(/^0 (\d+)$/);
    expect(Number(lines[1]?.split(' ')[1]) * 512).toBeGreaterThanOrEqual(2 * MiB);
    // util-linux words EOPNOTSUPP for a punch hole (which implies KEEP_SIZE) this way.
    expect(r.stdout).toMatch(/fallocate failed: keep size mode is unsupported\nrc=1/);
    expect(r.stdout).toMatch(/Permission denied\nrc=1/);
  });
});
