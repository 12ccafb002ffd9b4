// Symlinks in a snapshot may point only inside the tree. Lexical normalisation is not enough: with
// `a -> .`, the target `a/..` normalises to `.` but resolves to the tree's parent. So each target is
// resolved as the kernel would, through the other symlinks of the manifest, and refused as soon as a
// `..` would climb above the root or a target is absolute; names the manifest does not have are taken
// lexically (the sandbox may create them later, and `..` after them still may not climb out).
import { blobError } from './errors.js';
import type { ManifestEntry } from './manifest.js';

/** Links followed while resolving one target before it is refused (the kernel's limit is 40). */
const MAX_HOPS = 40;

export function checkSymlinkTargets(entries: readonly ManifestEntry[]): void {
  const links = new Map<string, string>();
  for (const e of entries) if (e.type === 'symlink') links.set(e.path, e.target);
  for (const [path, target] of links) {
    const parent = path.includes('/') ? path.slice(0, path.lastIndexOf('/')).split('/') : [];
    let hops = 0;
    const walk = (base: readonly string[], rel: string): string[] | undefined => {
      if (rel.startsWith('/')) return undefined;
      const cur = [...base];
      for (const name of rel.split('/')) {
        if (name === '' || name === '.') continue;
        if (name === '..') {
          if (cur.length === 0) return undefined;
          cur.pop();
          continue;
        }
        cur.push(name);
        const next = links.get(cur.join('/'));
        if (next === undefined) continue;
        if (++hops > MAX_HOPS) return undefined;
        const resolved = walk(cur.slice(0, -1), next);
        if (resolved === undefined) return undefined;
        cur.splice(0, cur.length, ...resolved);
      }
      return cur;
    };
    if (walk(parent, target) === undefined) {
      throw blobError(
        'symlink-escape',
        `symlink ${JSON.stringify(path)} -> ${JSON.stringify(target)} leads out of the tree`,
        {
          path,
          target,
        },
      );
    }
  }
}
