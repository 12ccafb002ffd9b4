// removeTree: a big file's unlink, which frees it inside the syscall, runs in the thread pool.
import { existsSync, fsyncSync, mkdirSync, openSync, closeSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';

import { removeTree } from '../../src/host/walk.js';
import { holdThreadPool } from './hold-pool.js';
import { tempRoot } from './tmp-root.js';

/** A file of `mib` MiB written out to the disk (its blocks allocated). */
function bigFile(path: string, mib: number): void {
  const fd = openSync(path, 'w');
  for (let i = 0; i < mib; i++) writeSync(fd, Buffer.alloc(1 << 20, 1));
  fsyncSync(fd);
  closeSync(fd);
}

describe('removeTree', () => {
  it('unlinks a big file in the thread pool and small ones on the spot', async () => {
    const root = await tempRoot();
    mkdirSync(join(root, 'small/sub'), { recursive: true });
    writeFileSync(join(root, 'small/a'), 'a');
    writeFileSync(join(root, 'small/sub/b'), 'b');
    mkdirSync(join(root, 'big'));
    bigFile(join(root, 'big/f'), 2);
    writeFileSync(join(root, 'big/g'), 'g');

    const release = holdThreadPool(root);
    try {
      // Nothing of a tree of small files waits for the pool.
      await removeTree(join(root, 'small'));
      expect(existsSync(join(root, 'small'))).toBe(false);

      // The big file's unlink waits for a pool thread, so the tree is still there.
      let finished = false;
      const removing = removeTree(join(root, 'big')).then(() => (finished = true));
      for (let i = 0; i < 20; i++) await nextTurn();
      expect(finished).toBe(false);
      expect(existsSync(join(root, 'big/f'))).toBe(true);
      await release();
      await removing;
    } finally {
      await release();
    }
    expect(existsSync(join(root, 'big'))).toBe(false);
  });
});
