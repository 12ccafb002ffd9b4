// A codebase layer that remembers missing directories (host/absent-dirs.ts): what it answers without a
// walk, and that a directory made behind its back is seen once the memory ages out.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';

import { HostDir } from '../../src/host/host-dir.js';
import { tempRoot } from './tmp-root.js';

async function openRoot(path: string, rememberMissingMs: number): Promise<HostDir> {
  const dir = await HostDir.open({ path, rememberMissingMs });
  onTestFinished(() => dir.close());
  return dir;
}

describe('HostDir rememberMissingMs', () => {
  it('answers below a missing directory without a walk, and sees it once the memory ages out', async () => {
    const root = await tempRoot();
    const dir = await openRoot(root, 150);
    expect(await dir.lstatOrNull('new/a')).toBeNull(); // the walk finds `new` missing
    // Known missing now: answered at once, also deeper down, without a promise.
    expect(dir.lstatIfCached('new/a/b')).toBeNull();
    await mkdir(join(root, 'new'));
    await writeFile(join(root, 'new/a'), 'x');
    expect(dir.lstatIfCached('new/a')).toBeNull(); // still within the memory's age
    await new Promise((r) => setTimeout(r, 200));
    expect((await dir.lstat('new/a')).size).toBe(1n);
  });

  it('forgets what it knew at its own namespace changes', async () => {
    const root = await tempRoot();
    const dir = await openRoot(root, 60_000);
    expect(await dir.lstatOrNull('made/f')).toBeNull();
    await dir.mkdir('made', 0o755);
    await writeFile(join(root, 'made/f'), 'xy');
    expect((await dir.lstat('made/f')).size).toBe(2n);
  });

  it('remembers nothing without the option', async () => {
    const root = await tempRoot();
    const dir = await HostDir.open({ path: root });
    onTestFinished(() => dir.close());
    expect(await dir.lstatOrNull('later/f')).toBeNull();
    await mkdir(join(root, 'later'));
    await writeFile(join(root, 'later/f'), 'x');
    expect((await dir.lstat('later/f')).size).toBe(1n);
  });

  it('says whether a directory has entries, cached or not', async () => {
    const root = await tempRoot();
    const dir = await openRoot(root, 0);
    await mkdir(join(root, 'd/e'), { recursive: true });
    expect(await dir.hasEntries('d/e')).toBe(false);
    expect(await dir.hasEntries('d')).toBe(true);
    await writeFile(join(root, 'd/e/f'), '');
    expect(await dir.hasEntries('d/e')).toBe(true);
    expect(await dir.hasEntries('')).toBe(true);
  });
});
