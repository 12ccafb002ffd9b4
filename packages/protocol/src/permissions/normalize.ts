// Codebase path normalisation. Paths are absolute and `/` is the codebase root. We collapse `//` and strip a
// trailing `/`, but never resolve `.` or `..`: a caller that passes one has a bug (or is being attacked), and
// silently resolving it would let `/public/../secrets` be judged as something it is not.
import { InvalidArgumentError } from '../errors.js';

/** True when `path` contains a `.` or `..` component. */
export function hasDotSegment(path: string): boolean {
  let start = 0;
  while (start <= path.length) {
    let end = path.indexOf('/', start);
    if (end === -1) end = path.length;
    const len = end - start;
    if ((len === 1 && path.charCodeAt(start) === 46) || (len === 2 && path.startsWith('..', start))) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

/** Collapses runs of `/` and strips a trailing `/` (the root stays `/`). No validation. */
export function collapseSlashes(path: string): string {
  let out = path.includes('//') ? path.replace(/\/{2,}/g, '/') : path;
  if (out.length > 1 && out.endsWith('/')) out = out.slice(0, -1);
  return out;
}

/** The canonical form of a codebase path; throws InvalidArgumentError for relative paths, `.`/`..` or NUL. */
export function normalizePath(path: string): string {
  if (typeof path !== 'string' || path.length === 0 || path.charCodeAt(0) !== 47) {
    throw new InvalidArgumentError(
      `invalid path ${JSON.stringify(path)}: expected an absolute codebase path such as "/src/main.ts"`,
      { details: { path } },
    );
  }
  // One pass finds whether anything needs a closer look: a NUL, a `//`, or a `/.` (a possible dot segment).
  // Canonical paths, the overwhelming majority, are returned as they are.
  let suspicious = false;
  for (let i = 1, prev = 47; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c === 0 || (prev === 47 && (c === 47 || c === 46))) {
      suspicious = true;
      break;
    }
    prev = c;
  }
  if (!suspicious) return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  if (path.includes('\0')) {
    throw new InvalidArgumentError(`invalid path ${JSON.stringify(path)}: contains a NUL byte`, {
      details: { path },
    });
  }
  const out = collapseSlashes(path);
  if (hasDotSegment(out)) {
    throw new InvalidArgumentError(
      `invalid path ${JSON.stringify(path)}: "." and ".." components are not resolved; pass a canonical path`,
      { details: { path } },
    );
  }
  return out;
}
