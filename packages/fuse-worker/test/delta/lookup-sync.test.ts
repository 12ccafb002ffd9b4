// Delta.lookupIfCached answers without a promise where no step needs the thread pool, for codebase entries
// and for entries the delta holds (a file the sandbox made, a copy-up, a directory made over a whiteout).
// Its answer must be exactly lookup()'s: which layer wins, what a whiteout hides, which identity a copied
// directory keeps. Checked here over one delta holding every kind of change.
import { constants } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import type { Delta } from '../../src/delta/delta.js';
import { fixture } from './fixture.js';

async function writeNew(delta: Delta, path: string, text: string): Promise<void> {
  const fh = await delta.create(path, 0o644, constants.O_WRONLY);
  try {
    await fh.writeFile(text);
  } finally {
    await fh.close();
  }
}

const CODEBASE = {
  'a/x.txt': 'x',
  'a/sub/y.txt': 'y',
  'b/z.txt': 'z',
  'c/old.txt': 'old',
  'd.txt': 'd',
};

const PATHS = [
  '/a',
  '/a/x.txt',
  '/a/new.txt',
  '/a/sub',
  '/a/sub/y.txt',
  '/a/q',
  '/b',
  '/b/z.txt',
  '/b/moved.txt',
  '/b/q',
  '/c',
  '/c/old.txt',
  '/c/in.txt',
  '/c/q',
  '/d.txt',
  '/e',
  '/e/f.txt',
  '/e/q',
  '/e/f.txt/q',
  '/q',
  '/q/r',
];

/** One change of every kind the delta holds. */
async function everyKind(delta: Delta): Promise<void> {
  await writeNew(delta, '/a/new.txt', 'new'); // upper file in a copied directory
  await delta.unlink('/a/x.txt'); // whiteout
  await delta.unlink('/c/old.txt');
  await delta.rmdir('/c');
  await delta.mkdir('/c', 0o755); // opaque directory over a whiteout
  await writeNew(delta, '/c/in.txt', 'in');
  await (await delta.openForWrite('/d.txt', constants.O_WRONLY)).close(); // copy-up
  await delta.mkdir('/e', 0o755); // a directory only the delta has
  await writeNew(delta, '/e/f.txt', 'f');
  await delta.rename('/a/new.txt', '/b/moved.txt');
  await delta.unlink('/b/z.txt');
  await delta.unlink('/a/sub/y.txt');
  await delta.rmdir('/a/sub');
  await writeNew(delta, '/a/sub', 'a file where a directory was'); // blocks a/sub/y.txt
}

describe('Delta.lookupIfCached', () => {
  it("gives lookup()'s answer for codebase entries, delta entries, whiteouts and blocked paths", async () => {
    const { delta } = await fixture(CODEBASE);
    await everyKind(delta);
    // Twice: the first pass's walks cache the directories' fds, so the second answers synchronously.
    const answered = new Set<string>();
    for (let pass = 0; pass < 2; pass++) {
      for (const path of PATHS) {
        const sync = delta.lookupIfCached(path);
        const async = await delta.lookup(path);
        if (sync === undefined) continue;
        answered.add(path);
        expect(sync, path).toEqual(async);
      }
    }
    // Not vacuous: entries of every kind were answered without a promise.
    for (const path of [
      '/a/sub',
      '/b/moved.txt',
      '/c/in.txt',
      '/c/old.txt',
      '/d.txt',
      '/e/f.txt',
      '/a/x.txt',
      '/a/q',
    ]) {
      expect(answered, path).toContain(path);
    }
    expect(delta.lookupIfCached('/a')).toMatchObject({ layer: 'upper', type: 'directory' });
    expect(delta.lookupIfCached('/a')?.lower).not.toBeNull(); // a copied directory keeps its identity
    expect(delta.lookupIfCached('/c/old.txt')).toBeNull(); // the opaque directory hides the codebase's
    expect(delta.lookupIfCached('/a/x.txt')).toBeNull(); // whited out
  });

  it("gives lookup()'s answer, or none, for entries served by frozen layers", async () => {
    const f = await fixture(CODEBASE);
    const { delta } = f;
    await everyKind(delta);
    await delta.checkpoint({ layerDir: join(f.root, 'l1') });
    await delta.unlink('/e/f.txt');
    await writeNew(delta, '/c/in2.txt', 'in2');
    await delta.checkpoint({ layerDir: join(f.root, 'l2') });
    await writeNew(delta, '/b/top.txt', 'top');
    const paths = [...PATHS, '/c/in2.txt', '/b/top.txt'];
    const answered = new Set<string>();
    for (let pass = 0; pass < 2; pass++) {
      for (const path of paths) {
        const sync = delta.lookupIfCached(path);
        const async = await delta.lookup(path);
        // What the FUSE layer does after a lookup found a directory below the writable layer.
        if (async?.layer === 'lower' && async.type === 'directory') delta.cacheLowerDir(path);
        if (sync === undefined) continue;
        answered.add(path);
        expect(sync, path).toEqual(async);
      }
    }
    // Not vacuous: entries held by each frozen layer, the codebase's and whiteouts answered synchronously.
    for (const path of [
      '/b/moved.txt',
      '/c/in.txt',
      '/c/in2.txt',
      '/d.txt',
      '/a/x.txt',
      '/e/f.txt',
      '/b/top.txt',
    ]) {
      expect(answered, path).toContain(path);
    }
    expect(delta.lookupIfCached('/c/old.txt')).toBeNull(); // the opaque directory, in the older layer
    expect(delta.lookupIfCached('/e/f.txt')).toBeNull(); // made in one layer, removed in the next
  });
});
