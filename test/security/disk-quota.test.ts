// Issue 12 row 4: `dd` into the write area filled the host disk (no space limit on the delta). With
// MountParams.diskQuotaBytes the worker refuses growth past the quota with ENOSPC, whatever the route:
// writes, copy-up of a big codebase file, truncate, many small files; `df` shows the quota; removing
// files gives the space back; the count survives a worker restart.
import { describe, expect, it } from 'vitest';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../worker/helpers/fixture.js';

const MiB = 1024 * 1024;

describe('disk quota on the delta', () => {
  useMountHygiene();

  it('dd past the quota fails with ENOSPC and the delta stays under it', async () => {
    const f = await mountFixture({
      tree: { 'src/a.txt': 'a\n', 'output/.keep': '' },
      rules: AGENT_SAFE,
      diskQuotaBytes: 8 * MiB,
    });
    const dd = await f.sandbox(
      'dd if=/dev/zero of=output/big bs=1M count=64 2>&1; echo rc=$?; stat -c %s output/big',
    );
    expect(dd.stdout).toMatch(/No space left on device/);
    expect(dd.stdout).toMatch(/rc=1/);
    const size = Number(dd.stdout.trim().split('\n').at(-1));
    expect(size).toBeLessThanOrEqual(8 * MiB);
    const du = await f.host(`du -sb ${f.delta}/upper | cut -f1`);
    expect(Number(du.stdout.trim())).toBeLessThanOrEqual(8 * MiB + 64 * 1024);
    // Space comes back when the file goes.
    const again = await f.sandbox(
      'rm output/big && dd if=/dev/zero of=output/small bs=1M count=4 2>/dev/null; echo rc=$?',
    );
    expect(again.stdout).toBe('rc=0\n');
  });

  it('truncate, a sparse seek and copy-up of a big codebase file are refused up front', async () => {
    const big = Buffer.alloc(6 * MiB, 1);
    const f = await mountFixture({
      tree: { 'output/big.bin': big, 'output/.keep': '' },
      rules: AGENT_SAFE,
      diskQuotaBytes: 4 * MiB,
    });
    const r = await f.sandbox(
      [
        'truncate -s 1G output/t 2>&1; echo rc=$?',
        'dd if=/dev/zero of=output/s bs=1 count=1 seek=100M 2>&1 | grep -q "No space" && echo nospace',
        'echo x >> output/big.bin; echo rc=$?',
      ].join('; '),
    );
    expect(r.stdout).toMatch(/truncate: .*No space left on device\nrc=1\nnospace\n/);
    expect(r.stderr + r.stdout).toMatch(/rc=1\n?$/);
    // The codebase file is unchanged for the sandbox too (nothing was copied up).
    const cmp = await f.sandbox('stat -c %s output/big.bin');
    expect(cmp.stdout.trim()).toBe(String(6 * MiB));
  });

  it('many empty files cannot exhaust the disk either (each entry costs a block)', async () => {
    const f = await mountFixture({
      tree: { 'output/.keep': '' },
      rules: AGENT_SAFE,
      diskQuotaBytes: 400 * 1024,
    });
    const r = await f.sandbox(
      'i=0; while [ $i -lt 200 ]; do touch output/f$i || break; i=$((i+1)); done; echo made=$i',
    );
    const made = Number(/made=(\d+)/.exec(r.stdout)?.[1]);
    expect(made).toBeLessThan(200);
    expect(r.stderr).toMatch(/No space left on device/);
  });

  it('df shows the quota, and the count survives a worker restart', async () => {
    const f = await mountFixture({
      tree: { 'output/.keep': '' },
      rules: AGENT_SAFE,
      diskQuotaBytes: 16 * MiB,
    });
    await f.sandbox('dd if=/dev/zero of=output/a bs=1M count=10 2>/dev/null');
    const df = await f.sandbox('df -B1 --output=size,avail /workspace | tail -1');
    const [size, avail] = df.stdout.trim().split(/\s+/).map(Number);
    expect(size).toBe(16 * MiB);
    expect(avail).toBeLessThanOrEqual(6 * MiB);
    await f.stop();
    const g = await mountFixture({
      lowerDir: f.lower,
      deltaDir: f.delta,
      rules: AGENT_SAFE,
      diskQuotaBytes: 16 * MiB,
    });
    const r = await g.sandbox('dd if=/dev/zero of=output/b bs=1M count=10 2>&1; echo rc=$?');
    expect(r.stdout).toMatch(/No space left on device[\s\S]*rc=1/);
  });
});
