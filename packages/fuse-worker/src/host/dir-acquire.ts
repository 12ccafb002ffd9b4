// Finding a directory's fd for a HostDir operation: the cache, else a walk from the deepest cached
// ancestor, one component at a time, never following a symlink (see HostDir).
import fsp from 'node:fs/promises';

import type { AbsentDirs } from './absent-dirs.js';
import type { CachedDir, DirFdCache } from './dir-fd-cache.js';
import { fdPath, WALK_DIR_FLAGS } from './flags.js';
import { isMissing } from './host-values.js';

export interface AcquireContext {
  readonly cache: DirFdCache;
  readonly root: CachedDir;
  /** Where a missing directory is remembered (the codebase layer only); the generation it was seen in. */
  readonly absent: AbsentDirs | null;
  readonly generation: number;
}

/** The directory made of `parts`, with a reference taken: cache hit, else a walk from the deepest hit. */
export async function acquireDir(ctx: AcquireContext, parts: readonly string[]): Promise<CachedDir> {
  const { cache } = ctx;
  if (parts.length === 0) return ctx.root;
  const hit = cache.acquire(parts.join('/'));
  if (hit !== undefined) return hit;
  // The deepest cached ancestor: the parent or grandparent usually (a walk or a create); past that,
  // from the root down while the cache hits (a path whose ancestors do not exist here, as in the
  // codebase layer below a directory the sandbox made). Either way O(depth) cache probes at most, not
  // O(depth) probes per level: a 3000-level path costs a few probes, not millions of hashed prefixes.
  let depth = parts.length - 1;
  let cur: CachedDir | undefined;
  const nearest = Math.max(1, parts.length - 3);
  for (; depth >= nearest && cur === undefined; depth--) {
    cur = cache.acquire(parts.slice(0, depth).join('/'));
  }
  if (cur !== undefined) {
    depth++;
  } else {
    cur = ctx.root;
    depth = 0;
    let prefix = '';
    for (; depth < nearest; depth++) {
      prefix = prefix === '' ? (parts[0] as string) : `${prefix}/${parts[depth] as string}`;
      const next = cache.acquire(prefix);
      if (next === undefined) break;
      await cache.release(cur);
      cur = next;
    }
  }
  for (; depth < parts.length; depth++) {
    const parent: CachedDir = cur;
    const rel = parts.slice(0, depth + 1).join('/');
    try {
      const handle = await fsp.open(`${fdPath(parent.handle.fd)}/${parts[depth]}`, WALK_DIR_FLAGS);
      cur = cache.insert(rel, handle);
    } catch (err) {
      if (isMissing(err)) ctx.absent?.remember(rel, ctx.generation);
      throw err;
    } finally {
      await cache.release(parent);
    }
  }
  return cur;
}
