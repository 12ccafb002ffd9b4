// A directory's link count (2 + visible subdirectories) is listed once and then kept: the kernel re-asks
// a directory's attributes after every entry made or removed in it, and each of those used to list the
// whole directory (a create in a directory of 2,200 files took 4.2 ms). What the sandbox sees must stay
// exact through mkdir, rmdir, renames, rule changes and failures.
import { constants } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished, vi } from 'vitest';

import { compileRules } from '@agentfense/protocol';
import { ROOT_INO } from '../../src/fs/inodes.js';
import type { Caller, PolicyFs } from '../../src/fs/policy-fs.js';
import type { Delta } from '../../src/delta/delta.js';
import { policyFsWithDelta } from './fixture.js';

const SANDBOX: Caller = { pid: 100, uid: 1000, gid: 1000 };
const RULES = [
  { pattern: '**', permission: 'write' as const },
  { pattern: '/work/secret/**', permission: 'none' as const, priority: 10 },
];

/** `work` has two visible subdirectories and a hidden one; the delta will hold it after the first create. */
async function setup(): Promise<{ fs: PolicyFs; delta: Delta; work: number }> {
  const root = await mkdtemp(join(tmpdir(), 'af-subdir-counts-'));
  onTestFinished(() => rm(root, { recursive: true, force: true }));
  for (const dir of ['work/one', 'work/two', 'work/secret', 'elsewhere']) {
    await mkdir(join(root, 'lower', dir), { recursive: true });
  }
  await writeFile(join(root, 'lower', 'work', 'a.txt'), 'a\n');
  const { fs, delta } = await policyFsWithDelta(root, { uid: 1000, gid: 1000, rules: RULES });
  const work = (await fs.lookup(ROOT_INO, 'work', SANDBOX)).ino;
  return { fs, delta, work };
}

const nlink = async (fs: PolicyFs, ino: number): Promise<number> => (await fs.getattr(ino, SANDBOX)).nlink;

describe('link counts of directories', () => {
  it('creating and removing files in a directory lists it once, not at every GETATTR', async () => {
    const { fs, delta, work } = await setup();
    expect(await nlink(fs, work)).toBe(4); // one, two (secret is hidden)
    const listings = vi.spyOn(delta, 'readdir');
    for (let i = 0; i < 20; i++) {
      await fs.create(work, `f${i}.txt`, 0o644, constants.O_WRONLY, SANDBOX);
      expect(await nlink(fs, work)).toBe(4);
    }
    for (let i = 0; i < 20; i++) {
      await fs.unlink(work, `f${i}.txt`, SANDBOX);
      expect(await nlink(fs, work)).toBe(4);
    }
    expect(listings.mock.calls.filter(([path]) => path === '/work')).toHaveLength(0);
  });

  it('mkdir and rmdir move the kept count without a listing, and it stays exact', async () => {
    const { fs, delta, work } = await setup();
    expect(await nlink(fs, work)).toBe(4);
    const listings = vi.spyOn(delta, 'readdir');
    await fs.mkdir(work, 'three', 0o755, SANDBOX);
    expect(await nlink(fs, work)).toBe(5);
    await fs.rmdir(work, 'one', SANDBOX); // a codebase directory: whiteout
    expect(await nlink(fs, work)).toBe(4);
    await fs.rmdir(work, 'three', SANDBOX);
    expect(await nlink(fs, work)).toBe(3);
    expect(listings.mock.calls.filter(([path]) => path === '/work')).toHaveLength(0);
  });

  it('a directory renamed out of and into directories is counted again in both', async () => {
    const { fs, work } = await setup();
    const elsewhere = (await fs.lookup(ROOT_INO, 'elsewhere', SANDBOX)).ino;
    await fs.mkdir(work, 'made', 0o755, SANDBOX); // codebase directories do not move (EXDEV)
    expect(await nlink(fs, work)).toBe(5);
    expect(await nlink(fs, elsewhere)).toBe(2);
    await fs.rename(work, 'made', elsewhere, 'moved', SANDBOX);
    expect(await nlink(fs, work)).toBe(4);
    expect(await nlink(fs, elsewhere)).toBe(3);
    // A file renamed changes no count.
    await fs.rename(work, 'a.txt', elsewhere, 'a.txt', SANDBOX);
    expect(await nlink(fs, work)).toBe(4);
    // Back: a failed rename (onto a non-empty directory) leaves both exact.
    await expect(fs.rename(elsewhere, 'moved', ROOT_INO, 'work', SANDBOX)).rejects.toThrow();
    expect(await nlink(fs, work)).toBe(4);
    expect(await nlink(fs, elsewhere)).toBe(3);
  });

  it('a rule change counts again: a directory hidden now no longer counts, one shown now does', async () => {
    const { fs, work } = await setup();
    expect(await nlink(fs, work)).toBe(4);
    await fs.setRules(
      compileRules([...RULES, { pattern: '/work/one/**', permission: 'none', priority: 10 }]),
    );
    expect(await nlink(fs, work)).toBe(3);
    await fs.setRules(compileRules([{ pattern: '**', permission: 'write' }]));
    expect(await nlink(fs, work)).toBe(5);
  });

  it('a failed mkdir leaves the count exact', async () => {
    const { fs, work } = await setup();
    expect(await nlink(fs, work)).toBe(4);
    await expect(fs.mkdir(work, 'one', 0o755, SANDBOX)).rejects.toMatchObject({ errnoName: 'EEXIST' });
    expect(await nlink(fs, work)).toBe(4);
  });
});
