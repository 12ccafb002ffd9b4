// Test helpers for frozen layers: the merged view as a user sees it, and a layer directory as the host has it.
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

import type { Delta } from '../../src/delta/delta.js';
import { read } from './fixture.js';

/**
 * Every entry of the merged view, walked through the Delta API: type, permission bits, mtime (ns), and a
 * file's content or a symlink's target. Equal views look the same to anything the sandbox runs.
 */
export async function viewOf(delta: Delta, dir = '/'): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const entries = (await delta.readdir(dir)).map((e) => e.name).sort();
  for (const name of entries) {
    const path = dir === '/' ? `/${name}` : `${dir}/${name}`;
    const found = await delta.lookup(path);
    if (found === null) throw new Error(`listed but not found: ${path}`);
    const mode = (Number(found.stat.mode) & 0o7777).toString(8);
    const what = `${found.type} ${mode} ${String(found.stat.mtimeNs)}`;
    if (found.type === 'directory') {
      out[path] = what;
      Object.assign(out, await viewOf(delta, path));
    } else if (found.type === 'symlink') {
      out[path] = `${what} -> ${await delta.readlink(path)}`;
    } else {
      out[path] = `${what} ${await read(delta, path)}`;
    }
  }
  return out;
}

/** A view without its times: two deltas doing the same work at different moments look the same. */
export function untimed(view: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(view).map(([path, what]) => [path, what.replace(/^(\S+ \S+) \d+/, '$1')]),
  );
}

/**
 * Every entry below `dir` on the host with what a write, a link, a chmod or a rename would change: inode,
 * link count, mode, size, mtime and ctime (ns).
 */
export async function hostState(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const st = await lstat(join(dir, name), { bigint: true });
    out[name] = [st.ino, st.nlink, st.mode, st.size, st.mtimeNs, st.ctimeNs].join(' ');
  }
  const root = await lstat(dir, { bigint: true });
  out['.'] = [root.ino, root.nlink, root.mode, root.mtimeNs, root.ctimeNs].join(' ');
  return out;
}

/** A frozen layer's metadata files (its meta/ directory: marker, snapshot, journal), by name, with their text. */
export async function layerMeta(layerDir: string): Promise<Record<string, string>> {
  const dir = join(layerDir, 'meta');
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) out[name] = await readFile(join(dir, name), 'utf8');
  return out;
}
