// A rule change in the middle of the entry warm-up's listing (packages/fuse-worker/src/fs/entry-warmup.ts):
// the worker answers the walker's READDIRPLUS a slice of entries at a time, in the sandbox's gaps, so the
// change can be processed between two slices of one answer, and the walker (killed by the change) still
// links whatever answer the worker had started. A name the new rules hide must not stay stat-able from the
// dcache afterwards. Two defences: the change tells the kernel to forget every name the worker answered
// (which kernel 6.18 does under the directory's lock, after the listing holding it has linked), and an
// answer finished after the change began carries timeouts of 0 (readdir-plus.ts). This test fails without
// the first (names of `big` stay stat-able); the second is the in-process test's
// (packages/fuse-worker/test/fs/readdir-plus.test.ts), since the kernel's lock makes it a second line here.
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';
import type { MountedFixture } from '../helpers/worker-fixture.js';

const FILES = 3000;
const ROUNDS = 8;
const OPEN = [{ pattern: '**', permission: 'read' as const }];
const HIDDEN = [...OPEN, { pattern: '/big/**', permission: 'none' as const, priority: 100 }];

async function readdirplusCount(f: MountedFixture): Promise<number> {
  return (await f.worker.client.request('stats', {})).ops.readdirplus?.count ?? 0;
}

describe('entry warm-up and rule changes', () => {
  useMountHygiene();

  it('names hidden by a rule change during the walk are gone at once, whatever slice they were in', async () => {
    const tree: Record<string, string> = { 'top.txt': 't\n' };
    for (let i = 0; i < FILES; i++) tree[`big/s${String(i).padStart(4, '0')}.txt`] = 's\n';
    const f = await mountFixture({ tree, rules: OPEN });
    const seen: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await f.worker.client.request('setRules', { rules: OPEN });
      // The first access after a rule change arms a new walk; it starts once the sandbox is quiet.
      const before = await readdirplusCount(f);
      await f.host('cat top.txt >/dev/null');
      const deadline = Date.now() + 20_000;
      // The walker is inside `big` once it has sent a few listings after the root's.
      while ((await readdirplusCount(f)) < before + 3) {
        expect(Date.now(), 'the walk did not start').toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 2));
      }
      await f.worker.client.request('setRules', { rules: HIDDEN });
      // From the host, through the mount: any name still answered is served from a stale dentry (the
      // worker refuses every LOOKUP under /big now).
      const r = await f.host(
        `python3 -c "import os
n = 0
for i in range(${FILES}):
    try:
        os.stat('big/s%04d.txt' % i); n += 1
    except FileNotFoundError:
        pass
print(n)"`,
      );
      seen.push(Number(r.stdout.trim()));
    }
    expect(seen).toEqual(Array.from({ length: ROUNDS }, () => 0));
  }, 180_000);
});
