// A delta made on frozen layers (a fork): the layers are checked by their marker, not read, and anything
// that is no frozen layer is refused before the delta directory exists.
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { Delta } from '../../src/delta/delta.js';
import { initDeltaStack } from '../../src/delta/init-stack.js';
import { fixture, read, write } from './fixture.js';

describe('initDeltaStack', () => {
  it('makes a delta that shows the layers it stands on', async () => {
    const f = await fixture({ 'a.txt': 'A' });
    await write(f.delta, '/forked', 'F');
    const layer = join(f.root, 'l1');
    await f.delta.checkpoint({ layerDir: layer });
    const deltaDir = join(f.root, 'fork');
    await initDeltaStack({ deltaDir, frozen: [layer] });
    const fork = await Delta.open({ lowerDir: f.lower, deltaDir });
    try {
      expect(fork.frozenLayers).toEqual([layer]);
      expect(await read(fork, '/forked')).toBe('F');
      expect(await read(fork, '/a.txt')).toBe('A');
    } finally {
      await fork.close();
    }
  });

  it('refuses a directory that is no frozen layer, making nothing', async () => {
    const f = await fixture({ 'a.txt': 'A' });
    const plain = join(f.root, 'plain');
    await mkdir(join(plain, 'meta'), { recursive: true });
    await mkdir(join(plain, 'upper'));
    for (const frozen of [[plain], [f.deltaDir], [join(f.root, 'none')]]) {
      const deltaDir = join(f.root, 'fork');
      await expect(initDeltaStack({ deltaDir, frozen })).rejects.toMatchObject({ errnoName: 'EINVAL' });
      expect(await readdir(f.root)).not.toContain('fork');
    }
  });
});
