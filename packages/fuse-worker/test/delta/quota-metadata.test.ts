// The disk quota counts what the delta really takes on the host: the blocks a file holds (a sparse file
// costs what it wrote), the names in its directories (hard links), and its own metadata (journal and
// snapshot), which is compacted while the sandbox works so that churn cannot grow it.
import { constants } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';

import { Delta } from '../../src/delta/delta.js';
import type { FsError } from '../../src/errors.js';
import { compactAfterBytes } from '../../src/delta/journal.js';
import { MetaState } from '../../src/delta/meta-state.js';
import { growthBound } from '../../src/delta/quota.js';

const KiB = 1024;
const MiB = 1024 * KiB;

async function quotaDelta(quotaBytes: number): Promise<{ delta: Delta; deltaDir: string; lower: string }> {
  const root = await mkdtemp(join(tmpdir(), 'af-quota-'));
  onTestFinished(() => rm(root, { recursive: true, force: true }));
  const lower = join(root, 'lower');
  const deltaDir = join(root, 'delta');
  await mkdir(lower);
  await mkdir(deltaDir);
  const delta = await Delta.open({ lowerDir: lower, deltaDir, diskQuotaBytes: quotaBytes });
  onTestFinished(() => delta.close());
  return { delta, deltaDir, lower };
}

/** Bytes the host's disk holds for everything under `dir` (allocated blocks, as `du` counts them). */
async function allocated(dir: string): Promise<number> {
  let total = (await lstat(dir)).blocks * 512;
  for (const name of await readdir(dir, { recursive: true }))
    total += (await lstat(join(dir, name))).blocks * 512;
  return total;
}

async function metaBytes(deltaDir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(join(deltaDir, 'meta')))
    total += (await stat(join(deltaDir, 'meta', name))).size;
  return total;
}

describe('disk quota: blocks, names and metadata', () => {
  it('create/unlink churn keeps the journal compacted and the quota free', async () => {
    const { delta, deltaDir, lower } = await quotaDelta(1 * MiB);
    const name = 'n'.repeat(100);
    for (let i = 0; i < 3000; i++) {
      const fh = await delta.create(`/${name}-${String(i)}`, 0o644, constants.O_WRONLY);
      await fh.close();
      await delta.unlink(`/${name}-${String(i)}`);
    }
    // ~900 KB of records were appended; compaction keeps what is on disk under its bound.
    expect(await metaBytes(deltaDir)).toBeLessThan(compactAfterBytes(1 * MiB) + 4 * KiB);
    expect(delta.quota?.used).toBeLessThan(compactAfterBytes(1 * MiB) + 64 * KiB);
    // Still room for real work, and nothing of the churn shows.
    const fh = await delta.create('/kept', 0o644, constants.O_WRONLY);
    await fh.writeFile(Buffer.alloc(512 * KiB, 1));
    await fh.close();
    expect((await delta.changes()).map((c) => `${c.kind} ${c.path}`)).toEqual(['added /kept']);
    // The compacted journal replays to the same state.
    const reopened = await Delta.open({ lowerDir: lower, deltaDir, diskQuotaBytes: 1 * MiB });
    onTestFinished(() => reopened.close());
    expect((await reopened.changes()).map((c) => `${c.kind} ${c.path}`)).toEqual(['added /kept']);
  });

  it('hard links cost their names: 20,000 of them do not fit in 1 MiB', async () => {
    const { delta, deltaDir } = await quotaDelta(1 * MiB);
    const fh = await delta.create('/f', 0o644, constants.O_WRONLY);
    await fh.close();
    await delta.mkdir('/d', 0o755);
    const link = (n: number): string => `/d/link-${'l'.repeat(40)}-${String(n)}`;
    let made = 0;
    let error: unknown;
    for (; made < 20_000; made++) {
      try {
        await delta.link('/f', link(made));
      } catch (err) {
        error = err;
        break;
      }
    }
    expect(made).toBeLessThan(20_000);
    expect((error as FsError).errnoName).toBe('ENOSPC');
    expect(String((error as Error).message)).toMatch(/disk quota of 1048576 bytes/);
    // What the host holds for the delta stays near the quota (its root directories are not charged).
    expect(await allocated(deltaDir)).toBeLessThan(1 * MiB + 64 * KiB);
    // A directory keeps its size when names go (ext4): removing it gives the room back.
    for (let n = 0; n < made; n++) await delta.unlink(link(n));
    await delta.rmdir('/d');
    await delta.link('/f', '/one-more');
  });

  it('the streamed snapshot is the snapshot', () => {
    const state = new MetaState();
    state.apply({ op: 'whiteout', path: 'a/b' });
    state.apply({ op: 'base', path: 'a/"q"', base: { exists: false } });
    state.apply({ op: 'base', path: 'c', base: { exists: false } });
    expect(JSON.parse([...state.snapshotText(7)].join(''))).toEqual(
      JSON.parse(JSON.stringify(state.snapshot(7))),
    );
    expect(JSON.parse([...new MetaState().snapshotText(1)].join(''))).toEqual(new MetaState().snapshot(1));
  });

  it('bounds what a write can add to a file before it runs', () => {
    const file = (size: number, blocks: number) => ({
      size: BigInt(size),
      blocks: BigInt(blocks),
      blksize: 4096n,
    });
    // A dense file rewritten in place adds nothing; appending adds the blocks past its end.
    expect(growthBound(file(8192, 16), { offset: 0, length: 8192 })).toBe(0);
    expect(growthBound(file(8192, 16), { offset: 8000, length: 1000 })).toBe(4096);
    expect(growthBound(file(100, 8), { offset: 100, length: 100 })).toBe(0);
    // A file with holes may hold none of the blocks a write touches.
    expect(growthBound(file(20 * 2 ** 30, 0), { offset: 6 * 2 ** 30, length: 10 })).toBe(4096);
    expect(growthBound(file(0, 0), { offset: 4095, length: 2 })).toBe(8192);
    expect(growthBound(file(0, 0), { offset: 0, length: 0 })).toBe(0);
  });
});
