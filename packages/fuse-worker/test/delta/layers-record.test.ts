// The record of a checkpoint or restore: a symlink carrying it (whole or absent after a power cut, so no
// fsync), renamed into meta/stack.json as the switch; a record too long for a symlink is an fsynced file.
import { lstat, readFile, readlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { layerFs } from '../../src/delta/layer-fs.js';
import {
  readIntent,
  readStack,
  writeLayerChangeIntent,
  type LayersIntent,
} from '../../src/delta/layer-stack.js';
import { failpoint } from './failpoint.js';
import { fixture, read, write } from './fixture.js';

afterEach(() => {
  vi.restoreAllMocks();
});

/** The names of the layer-fs steps `run` takes. */
async function stepsOf(run: () => Promise<unknown>): Promise<string[]> {
  const names: string[] = [];
  failpoint(Number.POSITIVE_INFINITY, (name) => names.push(name)).wrap(layerFs);
  await run();
  vi.restoreAllMocks();
  return names;
}

const syncing = ['writeFileSynced', 'writeFileDurably', 'fsyncDir', 'unlinkDurably'];

describe('the record of a checkpoint or restore', () => {
  it('is a symlink renamed into stack.json: no fsync, and a reopen reads the stack from it', async () => {
    const f = await fixture({ 'a.txt': 'A' });
    await write(f.delta, '/a.txt', 'one');
    const l1 = join(f.root, 'l1');
    const l2 = join(f.root, 'l2');

    const checkpoint = await stepsOf(() => f.delta.checkpoint({ layerDir: l1 }));
    expect(checkpoint).toContain('symlink');
    expect(checkpoint.filter((name) => syncing.includes(name))).toEqual([]);
    const stackFile = join(f.deltaDir, 'meta', 'stack.json');
    expect((await lstat(stackFile)).isSymbolicLink()).toBe(true);
    expect(JSON.parse(await readlink(stackFile, 'utf8'))).toMatchObject({ version: 1, frozen: [l1] });

    await write(f.delta, '/a.txt', 'two');
    await f.delta.checkpoint({ layerDir: l2 });
    const restore = await stepsOf(() => f.delta.restore({ frozen: [l1] }));
    expect(restore.filter((name) => syncing.includes(name))).toEqual([]);
    expect(await readStack(f.deltaDir)).toEqual([l1]);
    await f.delta.close();

    const again = await f.open();
    expect(again.frozenLayers).toEqual([l1]);
    expect(await read(again, '/a.txt')).toBe('one');
  });

  it('is a file whose data is fsynced when it is too long for a symlink', async () => {
    const f = await fixture();
    // 60 layers of 90-byte paths: past the 4,095 bytes an ext4 symlink holds.
    const frozen = Array.from({ length: 60 }, (_, i) => join(f.root, `${'l'.repeat(80)}${i}`));
    const intent: LayersIntent = { version: 1, op: 'restore', frozen };
    const steps = await stepsOf(() => writeLayerChangeIntent(f.deltaDir, intent));
    expect(steps).toContain('writeFileSynced');
    const path = join(f.deltaDir, 'meta', 'layers-intent.json');
    expect((await lstat(path)).isFile()).toBe(true);
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual(intent);
    expect(await readIntent(f.deltaDir)).toEqual(intent);
  });

  it('is damage when it is neither a record nor JSON', async () => {
    const f = await fixture();
    await writeFile(join(f.deltaDir, 'meta', 'stack.json'), 'not json');
    await expect(readStack(f.deltaDir)).rejects.toThrow(/stack\.json is damaged/);
  });
});
