// collectPoolGarbage unmounts and removes the directory a dead owner's pooled container names in its
// label. Anyone with the engine's socket can create a container with any label: only an owner directory
// of our own pool may be acted on, never `/` or another path the label names.
import { describe, expect, it } from 'vitest';
import { isOwnerDirOf } from '../src/container/pool.js';

describe('isOwnerDirOf: which labelled directories pool garbage collection may unmount', () => {
  const pool = '/var/lib/agentfense/docker-pool';

  it('accepts an owner directory directly below the pool directory', () => {
    expect(isOwnerDirOf(pool, `${pool}/4242-987654`)).toBe(true);
    expect(isOwnerDirOf(`${pool}/`, `${pool}/4242-987654`)).toBe(true);
    expect(isOwnerDirOf(pool, `${pool}/4242-unknown`)).toBe(true);
  });

  it('refuses anything else a hostile label could name', () => {
    for (const dir of [
      '/',
      '/run',
      pool,
      `${pool}/4242-987654/slot-1`,
      `${pool}/../4242-987654`,
      `/tmp/4242-987654`,
      `${pool}/4242-987654/..`,
      `${pool}/not-an-owner`,
      '4242-987654',
    ]) {
      expect(isOwnerDirOf(pool, dir), dir).toBe(false);
    }
  });
});
