// Validation and splitting of root-relative host paths ('a/b/c'; '' is the root itself).

/**
 * Splits a root-relative path into components. Invariant: no component is '', '.', '..' or contains '/'
 * or NUL, so each component names exactly one entry inside its parent and can never climb out of the root.
 * A violation is a programming error of the caller (paths are validated at the FUSE boundary), so it throws.
 */
export function splitRel(rel: string): string[] {
  if (rel === '') return [];
  const parts = rel.split('/');
  for (const part of parts) {
    if (part === '' || part === '.' || part === '..' || part.includes('\0')) {
      throw new TypeError(`invalid relative host path: ${JSON.stringify(rel)}`);
    }
  }
  return parts;
}

/**
 * Throws like splitRel unless `part` (the last component of `rel`) is a valid component. For the fast
 * paths that look the parent up in the directory-fd cache: its keys are paths splitRel accepted (only
 * HostDir's walk inserts them), so on a hit only the last component is left to check; a miss goes
 * through splitRel in full. Saves splitting and re-joining the path on every lookup.
 */
export function checkLastPart(part: string, rel: string): void {
  if (part === '' || part === '.' || part === '..' || part.includes('\0') || part.includes('/')) {
    throw new TypeError(`invalid relative host path: ${JSON.stringify(rel)}`);
  }
}

/** The parent of a validated relative path ('' for a top-level entry). */
export function relParent(rel: string): string {
  const i = rel.lastIndexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

/** The last component of a validated relative path. */
export function relBase(rel: string): string {
  return rel.slice(rel.lastIndexOf('/') + 1);
}

/** Joins a relative directory and a single entry name. */
export function relJoin(dir: string, name: string): string {
  return dir === '' ? name : `${dir}/${name}`;
}

/** True when `rel` is `dir` itself or lies below it. */
export function relIsWithin(rel: string, dir: string): boolean {
  return dir === '' || rel === dir || (rel.startsWith(dir) && rel.charCodeAt(dir.length) === 47);
}
