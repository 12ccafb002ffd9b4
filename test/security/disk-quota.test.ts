// Attack: fill the host's disk from the write area. `dd` past any bound; 20,000 hard links under a 1 MiB
// quota (13 MB on the host while 16 KiB was counted); create/unlink churn (the delta's journal grew to
// 66 MB). Defence: MountParams.diskQuotaBytes bounds what the delta takes on the host, counted as the host
// counts it: the blocks each file holds (sparse files cost what they wrote, so they work), the
// directories' blocks (names), and the delta's own journal and snapshot, compacted as the sandbox works.
// Growth past it fails with ENOSPC before it touches the disk, whatever the route; `df` shows the quota;
// removing files gives the space back; the count survives a worker restart.
import { describe, expect, it } from 'vitest';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';

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

  it('a sparse file costs the blocks it holds; copy-up of a big codebase file is refused up front', async () => {
    const big = Buffer.alloc(6 * MiB, 1);
    const f = await mountFixture({
      tree: { 'output/big.bin': big, 'output/.keep': '' },
      rules: AGENT_SAFE,
      diskQuotaBytes: 4 * MiB,
    });
    // Sparse files (databases, disk images) work: a size or a far offset costs no block.
    const sparse = await f.sandbox(
      [
        'truncate -s 20G output/t; echo rc=$?',
        'dd if=/dev/zero of=output/s bs=4096 count=1 seek=1572864 2>/dev/null; echo rc=$?',
        'stat -c %s output/t output/s',
      ].join('; '),
    );
    expect(sparse.stdout).toBe(`rc=0\nrc=0\n${String(20 * 1024 ** 3)}\n${String(6 * 1024 ** 3 + 4096)}\n`);
    const df = await f.sandbox('df -B1 --output=avail /workspace | tail -1');
    expect(Number(df.stdout.trim())).toBeGreaterThan(3 * MiB);
    const du = await f.host(`du -s -B1 ${f.delta}/upper | cut -f1`);
    expect(Number(du.stdout.trim())).toBeLessThan(MiB);
    // What is written into the holes is counted: past the quota, ENOSPC.
    const fill = await f.sandbox('dd if=/dev/zero of=output/t bs=1M count=8 conv=notrunc 2>&1; echo rc=$?');
    expect(fill.stdout).toMatch(/No space left on device[\s\S]*rc=1/);
    // A codebase file bigger than the quota is refused before anything is copied.
    const r = await f.sandbox('echo x >> output/big.bin; echo rc=$?');
    expect(r.stderr + r.stdout).toMatch(/rc=1\n?$/);
    const cmp = await f.sandbox('stat -c %s output/big.bin');
    expect(cmp.stdout.trim()).toBe(String(6 * MiB));
  });

  it('hard links and create/unlink churn are charged: the delta on the host stays within the quota', async () => {
    const f = await mountFixture({
      tree: { 'output/.keep': '' },
      rules: AGENT_SAFE,
      diskQuotaBytes: 1 * MiB,
    });
    // 20,000 hard links: each is a name in a directory and a record in the delta's metadata.
    const links = await f.sandbox(
      'python3 -c "' +
        'import os\n' +
        "open('output/f', 'w').close()\n" +
        'n = 0\n' +
        'try:\n' +
        "    while n < 20000: os.link('output/f', 'output/l%d' % n); n += 1\n" +
        'except OSError as e: print(e.strerror)\n' +
        'print(n)"',
      { timeoutMs: 120_000 },
    );
    const [why, made] = links.stdout.trim().split('\n');
    expect(why, links.stderr).toBe('No space left on device');
    expect(Number(made)).toBeLessThan(20_000);
    const used = async (): Promise<number> =>
      Number((await f.host(`du -s -B1 ${f.delta} | cut -f1`)).stdout.trim());
    expect(await used()).toBeLessThan(1 * MiB + 64 * 1024);
    // Churn: creating and removing files leaves nothing, so it can go on without end.
    const churn = await f.sandbox(
      'rm -f output/l* && python3 -c "' +
        'import os\n' +
        'for i in range(20000):\n' +
        "    p = 'output/%s%d' % ('c' * 100, i); open(p, 'w').close(); os.unlink(p)\n" +
        "print('done')\"",
      { timeoutMs: 240_000 },
    );
    expect(churn.stdout + churn.stderr).toBe('done\n');
    expect(await used()).toBeLessThan(1 * MiB + 64 * 1024);
  }, 400_000);

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
