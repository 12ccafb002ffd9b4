// Test helper for frozen layers: one history of changes played on a delta twice, with a checkpoint
// between its rounds and without, so what the stack reports can be compared with what one delta does.
import { join } from 'node:path';

import type { Delta } from '../../src/delta/delta.js';
import { fixture, write, type Fixture } from './fixture.js';

export const CODEBASE = {
  'a.txt': 'A\n',
  'b.txt': 'B\n',
  'c.txt': 'C\n',
  'gone.txt': 'G\n',
  'mode.sh': 'echo\n',
  'd/x': 'X\n',
  'd/sub/y': 'Y\n',
  'e/z': 'Z\n',
  'keep/k': 'K\n',
};

/** Rounds of changes; a checkpoint may follow each round but the last. */
export const ROUNDS: readonly ((delta: Delta) => Promise<void>)[] = [
  async (delta) => {
    await write(delta, '/a.txt', 'A\none\n');
    await write(delta, '/b.txt', 'B\none\n');
    await write(delta, '/tmp.txt', 'added, removed later\n');
    await delta.mkdir('/new', 0o750);
    await write(delta, '/new/f', 'F\n', 0o640);
    await delta.symlink('a.txt', '/ln');
    await delta.unlink('/c.txt');
    await write(delta, '/d/sub/added', 'N\n');
    await delta.mkdir('/gonedir', 0o755);
    await write(delta, '/gonedir/f', 'gone\n');
  },
  async (delta) => {
    await write(delta, '/a.txt', 'A\none\ntwo\n');
    await delta.unlink('/b.txt'); // modified in round 1, deleted now
    await delta.unlink('/tmp.txt'); // added in round 1: no change at all
    await delta.unlink('/gonedir/f');
    await delta.rmdir('/gonedir');
    await write(delta, '/c.txt', 'C again\n'); // deleted in round 1: a replacement
    await delta.setattr('/mode.sh', { mode: 0o755 });
    await delta.setattr('/new/f', { mode: 0o600 });
    await delta.unlink('/ln');
    await delta.symlink('b.txt', '/ln');
    await delta.unlink('/d/sub/added');
    await delta.unlink('/d/sub/y');
    await delta.rmdir('/d/sub');
    await delta.mkdir('/d/sub', 0o700); // opaque
    await write(delta, '/d/sub/y', 'Y new\n');
    await delta.setattr('/d', { mode: 0o711 });
  },
  async (delta) => {
    await write(delta, '/new/g', 'G\n');
    await write(delta, '/e/z', 'Z\nthree\n');
    await delta.unlink('/gone.txt');
    await write(delta, '/gone.txt', 'back\n');
    await delta.unlink('/gone.txt');
    await delta.symlink('../a.txt', '/new/up');
  },
];

/** A fixture over CODEBASE after ROUNDS, with a checkpoint (layer l1, l2, ...) between rounds when `layered`. */
export async function played(layered: boolean): Promise<Fixture & { layers: string[] }> {
  const f = await fixture(CODEBASE);
  const layers: string[] = [];
  for (const [i, round] of ROUNDS.entries()) {
    await round(f.delta);
    if (layered && i < ROUNDS.length - 1) {
      const layerDir = join(f.root, `l${String(i + 1)}`);
      await f.delta.checkpoint({ layerDir });
      layers.push(layerDir);
    }
  }
  return { ...f, layers };
}
