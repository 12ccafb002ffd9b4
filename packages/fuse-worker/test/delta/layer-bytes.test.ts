// A frozen layer costs what the disk quota counted for it while it was the writable layer (blocks, names,
// metadata), and that cost keeps counting against the same limit after the checkpoint: checkpointing
// cannot make room.
import { constants, writeSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile as writeHostFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';

import { Delta } from '../../src/delta/delta.js';
import type { FsError } from '../../src/errors.js';
import { layerBytes } from '../../src/delta/layer-bytes.js';
import { writeWithin } from '../../src/delta/quota.js';

const KiB = 1024;

async function quotaDelta(
  quotaBytes: number | undefined,
  frozenBytes?: number,
  lowerFiles: readonly string[] = [],
): Promise<{ delta: Delta; root: string }> {
  const root = await mkdtemp(join(tmpdir(), 'af-layer-bytes-'));
  onTestFinished(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, 'lower'));
  for (const rel of lowerFiles) {
    await mkdir(join(root, 'lower', rel, '..'), { recursive: true });
    await writeHostFile(join(root, 'lower', rel), `${rel}\n`);
  }
  await mkdir(join(root, 'delta'));
  const delta = await Delta.open({
    lowerDir: join(root, 'lower'),
    deltaDir: join(root, 'delta'),
    ...(quotaBytes === undefined ? {} : { diskQuotaBytes: quotaBytes }),
    ...(frozenBytes === undefined ? {} : { frozenBytes }),
  });
  onTestFinished(() => delta.close());
  return { delta, root };
}

/** Writes `bytes` at `offset` of a new file as the FUSE layer does: within the quota (data-ops.ts). */
async function writeFile(delta: Delta, path: string, bytes: number, offset = 0): Promise<void> {
  const fh = await delta.create(path, 0o644, constants.O_WRONLY);
  try {
    const data = Buffer.alloc(bytes, 7);
    const write = (): number => writeSync(fh.fd, data, 0, bytes, offset);
    if (delta.quota === null) write();
    else writeWithin(delta.quota, fh.fd, { offset, length: bytes }, path, write);
  } finally {
    await fh.close();
  }
}

describe('frozen layer bytes', () => {
  it("measures a layer as the quota counted it: blocks, hard links once, sparse files' holes free", async () => {
    const { delta, root } = await quotaDelta(64 * 1024 * KiB);
    await delta.mkdir('/dir', 0o755);
    await writeFile(delta, '/dir/a', 100 * KiB);
    await delta.link('/dir/a', '/dir/a-link');
    await writeFile(delta, '/sparse', 3, 10 * 1024 * KiB);
    await delta.symlink('dir/a', '/link');
    await delta.quota?.whenReady();
    const counted = delta.quota?.used ?? 0;
    const layerDir = join(root, 'l1');
    const { bytes } = await delta.checkpoint({ layerDir });
    expect(bytes).toBe(counted);
    // The walk (the quota's recount at open too) agrees exactly with the live count, the upper root
    // directory's block included.
    expect(await layerBytes(layerDir)).toBe(counted);
    // 100 KiB once (not twice for the link), the sparse file's one block, not its 10 MiB.
    expect(bytes).toBeGreaterThanOrEqual(100 * KiB);
    expect(bytes).toBeLessThan(200 * KiB);
  });

  it('measures a layer of copied-up codebase files as the quota counted it, their directory grown', async () => {
    // 300 names of 40 bytes: the copied-up directory holds more than one block.
    const names = Array.from(
      { length: 300 },
      (_, i) => `src/a-module-with-a-long-name-${String(i).padStart(4, '0')}.py`,
    );
    const { delta, root } = await quotaDelta(64 * 1024 * KiB, undefined, names);
    await delta.quota?.whenReady();
    for (const name of names) await (await delta.openForWrite(`/${name}`, constants.O_WRONLY)).close();
    const counted = delta.quota?.used ?? 0;
    const layerDir = join(root, 'l1');
    const { bytes } = await delta.checkpoint({ layerDir });
    expect(bytes).toBe(counted);
    expect(await layerBytes(layerDir)).toBe(counted);
    expect(counted).toBeGreaterThan((names.length + 2 + 1) * 4 * KiB); // the files, src/ and root, src/ grown
  });

  it('counts at open what it counted live: the recount of the writable layer agrees', async () => {
    const { delta, root } = await quotaDelta(64 * 1024 * KiB, undefined, ['src/app.py']);
    await delta.quota?.whenReady();
    expect(delta.quota?.used).toBe(4 * KiB); // the empty upper root's block
    await (await delta.openForWrite('/src/app.py', constants.O_WRONLY)).close();
    await writeFile(delta, '/out', 10 * KiB);
    const live = delta.quota?.used;
    await delta.close();
    const again = await Delta.open({
      lowerDir: join(root, 'lower'),
      deltaDir: join(root, 'delta'),
      diskQuotaBytes: 64 * 1024 * KiB,
    });
    onTestFinished(() => again.close());
    await again.quota?.whenReady();
    expect(again.quota?.used).toBe(live);
  });

  it('without a quota the checkpoint counts nothing (it stays O(1)); a walk measures the layer', async () => {
    const { delta, root } = await quotaDelta(undefined);
    await writeFile(delta, '/f', 50 * KiB);
    const { bytes } = await delta.checkpoint({ layerDir: join(root, 'l1') });
    expect(bytes).toBeNull();
    expect(await layerBytes(join(root, 'l1'))).toBeGreaterThanOrEqual(50 * KiB);
  });

  it('a checkpoint keeps its bytes charged: the next write past the limit gets ENOSPC', async () => {
    const { delta, root } = await quotaDelta(400 * KiB);
    await writeFile(delta, '/one', 300 * KiB);
    const { bytes } = await delta.checkpoint({ layerDir: join(root, 'l1') });
    expect(delta.quota?.frozen).toBe(bytes);
    await expect(writeFile(delta, '/two', 300 * KiB)).rejects.toMatchObject({
      errnoName: 'ENOSPC',
    } satisfies Partial<FsError>);
    // Given back (the control plane's total after the checkpoint's deletion): the write fits.
    if (delta.quota !== null) delta.quota.frozen = 0;
    await delta.unlink('/two').catch(() => undefined);
    await writeFile(delta, '/two', 300 * KiB);
  });

  it('counts frozen bytes given at open against the limit', async () => {
    const { delta } = await quotaDelta(400 * KiB, 300 * KiB);
    await expect(writeFile(delta, '/f', 200 * KiB)).rejects.toMatchObject({ errnoName: 'ENOSPC' });
    expect(delta.quota?.free).toBeLessThanOrEqual(100 * KiB);
  });
});
