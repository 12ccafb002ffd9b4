// Attacks on the entry warm-up (packages/fuse-worker/src/fs/entry-warmup.ts): after the sandbox's first
// access the worker lists the tree through its own mount. The worker is root in the host's namespaces,
// where a symlink inside the mount resolves to a host path: a sandbox that turns a directory it may write
// into a symlink between the worker's listing of the parent and its visit of that directory must not make
// the worker open, list or walk a host directory. (packages/fuse-worker/test/fs/entry-warmup.test.ts
// swaps at the exact moment, deterministically; this is the attack as a sandbox mounts it.)
import { mkdir, mkdtemp, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';

/** 600 directories, each with two files and a subdirectory `s`: the names the attacker swaps. */
function tree(): Record<string, string> {
  const t: Record<string, string> = {};
  for (let d = 0; d < 600; d++) {
    const dir = `a${String(d).padStart(3, '0')}`;
    for (let f = 0; f < 2; f++) t[`${dir}/f${f}.txt`] = `${d}.${f}\n`;
    t[`${dir}/s/inside.txt`] = `${d}\n`;
  }
  return t;
}

describe('entry warm-up attacks', () => {
  useMountHygiene();

  it('directories swapped for symlinks to a host directory during the walk are refused, never listed', async () => {
    // A host directory the sandbox wants the worker (root in the host's namespaces) to list; its atime
    // tells whether anyone did (relatime updates an atime older than the mtime at the next listing).
    const hostDir = await mkdtemp(join(tmpdir(), 'af-warmup-target-'));
    try {
      await mkdir(join(hostDir, 'deeper'));
      for (const d of [hostDir, join(hostDir, 'deeper')])
        await utimes(d, new Date('2001-01-01T00:00:00Z'), new Date());
      const before = [(await stat(hostDir)).atimeMs, (await stat(join(hostDir, 'deeper'))).atimeMs];
      const f = await mountFixture({ tree: tree(), rules: [{ pattern: '**', permission: 'write' }] });
      // The sandbox's first access arms the walk, which starts once the sandbox is quiet and lists the top
      // directories (queueing each `s`) before it visits any `s`. Meanwhile the sandbox keeps turning every
      // `s` into a symlink to the host directory and back, pausing between names (the walk runs in the
      // sandbox's gaps), until the walk is over: many are listed as a directory and visited as a symlink.
      const attack = f.sandbox(
        `ls >/dev/null; sleep 0.25
         while [ ! -e stop ]; do
           for d in a*/; do mv "$d"s "$d"s.d && ln -s ${hostDir} "$d"s; sleep 0.005; done
           for d in a*/; do rm "$d"s && mv "$d"s.d "$d"s; done
         done; echo done`,
      );
      const deadline = Date.now() + 60_000;
      let warmup;
      while ((warmup = (await f.worker.client.request('stats', {})).warmup) === undefined) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 50));
      }
      await writeFile(join(f.mnt, 'stop'), '');
      expect((await attack).stdout).toBe('done\n');
      // The host directory was never listed, nor anything below it...
      expect([(await stat(hostDir)).atimeMs, (await stat(join(hostDir, 'deeper'))).atimeMs]).toEqual(before);
      // ...though the race happened: names listed as directories were symlinks when visited, and refused.
      expect(warmup.refused).toBeGreaterThan(0);
    } finally {
      await rm(hostDir, { recursive: true, force: true });
    }
  }, 90_000);
});
