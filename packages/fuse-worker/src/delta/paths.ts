// Conversions between codebase paths ('/a/b', '/' is the root) and the layers' relative paths ('a/b', '').
import { relIsWithin, splitRel } from '../host/rel-path.js';

/** The relative path of a validated codebase path ('/' -> ''). */
export function toRel(path: string): string {
  if (!path.startsWith('/')) throw new TypeError(`codebase path must be absolute: ${JSON.stringify(path)}`);
  const rel = path.length > 1 && path.endsWith('/') ? path.slice(1, -1) : path.slice(1);
  splitRel(rel);
  return rel;
}

/** The codebase path of a relative path. */
export function toCodebase(rel: string): string {
  return `/${rel}`;
}

/** True when `rel` is selected by a list of codebase paths (none = everything). */
export function selected(rel: string, paths: readonly string[] | undefined): boolean {
  if (paths === undefined) return true;
  return paths.some((p) => relIsWithin(rel, toRel(p)));
}
