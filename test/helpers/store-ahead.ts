// Waiting for the worker's store-ahead and read-ahead (packages/fuse-worker/src/fs/store-ahead.ts) from its
// `stats` counters: the tests of test/worker/store-ahead.test.ts and test/security/store-ahead.test.ts.
import { expect } from 'vitest';
import type { MountedFixture } from './worker-fixture.js';

/** Requests of kind `op` the worker answered (or store-ahead/readahead events it counted). */
export async function opCount(f: MountedFixture, op: string): Promise<number> {
  return (await f.worker.client.request('stats', {})).ops[op]?.count ?? 0;
}

/** Waits until `op` has been counted at least `n` times; fails with the count reached. */
export async function waitForOps(
  f: MountedFixture,
  op: string,
  n: number,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let seen = await opCount(f, op);
  while (seen < n && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    seen = await opCount(f, op);
  }
  expect(seen, `${op} count`).toBeGreaterThanOrEqual(n);
}
