// LOOKUP of a directory: its link count without a listing when the host's own count proves there is no
// subdirectory, and its fd cached so the lookups inside it that follow take no thread-pool trip.
import { constants } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished, vi } from 'vitest';

import { ROOT_INO } from '../../src/fs/inodes.js';
import type { Caller, PolicyFs } from '../../src/fs/policy-fs.js';
import type { Delta } from '../../src/delta/delta.js';
import { policyFsWithDelta } from './fixture.js';

const SANDBOX: Caller = { pid: 100, uid: 1000, gid: 1000 };
const EXT4 = 0xef53;
const TMPFS = 0x01021994;

async function setup(): Promise<{ fs: PolicyFs; delta: Delta }> {
  const root = await mkdtemp(join(tmpdir(), 'af-lookup-dirs-'));
  onTestFinished(() => rm(root, { recursive: true, force: true }));
  const lower = join(root, 'lower');
  for (const dir of ['leaf', 'parent/one', 'parent/secret', 'parent/two']) {
    await mkdir(join(lower, dir), { recursive: true });
  }
  await writeFile(join(lower, 'leaf', 'a.txt'), 'a\n');
  await writeFile(join(lower, 'parent', 'b.txt'), 'b\n');
  return policyFsWithDelta(root, {
    uid: 1000,
    gid: 1000,
    rules: [
      { pattern: '**', permission: 'write' },
      { pattern: '/parent/secret/**', permission: 'none', priority: 10 },
    ],
  });
}

const countingFs = async (path: string): Promise<boolean> =>
  [EXT4, TMPFS].includes((await statfs(path)).type);
const onCountingFs = await countingFs(tmpdir());

describe('LOOKUP of a directory', () => {
  it.skipIf(!onCountingFs)(
    'a codebase directory without subdirectories is counted without listing it (the host link count is exact here)',
    async () => {
      const { fs, delta } = await setup();
      const listings = vi.spyOn(delta, 'readdir');
      const leaf = await fs.lookup(ROOT_INO, 'leaf', SANDBOX);
      expect(leaf.ino).toBeGreaterThan(0);
      expect('attr' in leaf && leaf.attr.nlink).toBe(2);
      expect(listings).not.toHaveBeenCalled();
    },
  );

  it('a directory with subdirectories is listed: hidden ones do not count', async () => {
    const { fs, delta } = await setup();
    const listings = vi.spyOn(delta, 'readdir');
    const parent = await fs.lookup(ROOT_INO, 'parent', SANDBOX);
    // one and two; secret is hidden (the host says 5).
    expect('attr' in parent && parent.attr.nlink).toBe(4);
    expect(listings).toHaveBeenCalledWith('/parent');
  });

  it('a directory the delta holds is listed, whatever the link count of its copy there', async () => {
    const { fs } = await setup();
    // A file created in `parent` puts a copy of the directory in the delta with no subdirectory in it
    // (its own link count 2), while the sandbox sees two: its count must come from the merged listing.
    const parent = (await fs.lookup(ROOT_INO, 'parent', SANDBOX)).ino;
    await fs.create(parent, 'new.txt', 0o644, constants.O_WRONLY, SANDBOX);
    const again = await fs.lookup(ROOT_INO, 'parent', SANDBOX);
    expect('attr' in again && again.attr.nlink).toBe(4);
    // A directory made in a leaf counts.
    const leaf = (await fs.lookup(ROOT_INO, 'leaf', SANDBOX)).ino;
    await fs.mkdir(leaf, 'made', 0o755, SANDBOX);
    const leafAgain = await fs.lookup(ROOT_INO, 'leaf', SANDBOX);
    expect('attr' in leafAgain && leafAgain.attr.nlink).toBe(3);
  });

  it('its fd is cached: the lookup of a name inside it is answered without a promise', async () => {
    const { fs, delta } = await setup();
    // Before: the directory's fd is not open, so the synchronous path cannot answer.
    expect(delta.lookupIfCached('/leaf/a.txt')).toBeUndefined();
    await fs.lookup(ROOT_INO, 'leaf', SANDBOX);
    expect(delta.lookupIfCached('/leaf/a.txt')).toMatchObject({ layer: 'lower', type: 'file' });
    expect(delta.lookupIfCached('/leaf/missing.txt')).toBeNull();
  });
});
