// What `df` inside a sandbox with a quota shows: the quota as the disk's size, and as free what is left of
// it with the binding's unfolded write charges counted at their bounds and its unspent grant counted as
// free; the answer never folds the charges (a fold fstats every file written since the last one).
import { describe, expect, it } from 'vitest';
import { DiskQuota, quotaStatfs } from '../../src/delta/quota.js';
import type { QuotaBorrower } from '../../src/delta/quota.js';

const MiB = 1024 * 1024;
const HOST = { bsize: 4096, blocks: 10 ** 9, bfree: 10 ** 8, bavail: 10 ** 8 };

function borrower(spent: number, unspent: number): QuotaBorrower & { folds: number } {
  return {
    folds: 0,
    spent: () => spent,
    reserved: () => spent + unspent,
    reclaim() {
      this.folds++;
    },
  };
}

describe('quotaStatfs', () => {
  it('shows the quota as the size and counts spent charges, not the unspent grant, as used', () => {
    const quota = new DiskQuota(64 * MiB);
    quota.set(1n, 10 * MiB);
    const lent = borrower(3 * MiB, 20 * MiB);
    quota.lend(lent);
    const s = quotaStatfs(quota, HOST);
    expect(s.blocks).toBe((64 * MiB) / 4096);
    expect(s.bavail).toBe((51 * MiB) / 4096);
    expect(s.bfree).toBe(s.bavail);
    expect(lent.folds).toBe(0);
    // the checks still see the grant as held (it is the binding's to spend)
    expect(quota.free).toBe(31 * MiB);
  });

  it("the host's free space caps what is shown", () => {
    const quota = new DiskQuota(64 * MiB);
    const s = quotaStatfs(quota, { ...HOST, bfree: 100, bavail: 50 });
    expect([s.bfree, s.bavail]).toEqual([100, 50]);
  });
});
