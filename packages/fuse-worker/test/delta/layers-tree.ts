// Test helpers for commits of frozen layers: the codebase as a commit leaves it, and the frozen layers
// as the host has them.
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';

import { hostState, layerMeta } from './layer-view.js';

/** The codebase as a commit leaves it: every entry's type, permission bits and content or target. */
export async function codebaseTree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const path = join(dir, name);
    const st = await lstat(path);
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isDirectory()) out[name] = `directory ${mode}`;
    else if (st.isSymbolicLink()) out[name] = `symlink -> ${await readlink(path)}`;
    else out[name] = `file ${mode} ${await readFile(path, 'utf8')}`;
  }
  return out;
}

/** Every frozen layer's host state: inodes, link counts, modes, sizes, times, and its metadata's text. */
export async function layersState(layers: readonly string[]): Promise<unknown[]> {
  return Promise.all(layers.map(async (dir) => [await hostState(dir), await layerMeta(dir)]));
}
