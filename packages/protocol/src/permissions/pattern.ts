// Static facts about rule patterns: type inference, literal prefixes and glob structure.
import type { PatternType } from './types.js';

/** The characters that make a pattern a glob when its type is omitted (contract §1). */
const INFER_GLOB_CHARS = /[*?[\]{}!]/;

/**
 * Characters after which a glob is no longer a literal string. Wider than INFER_GLOB_CHARS: picomatch also
 * gives `(`, `)`, `\` and extglob `@(`/`+(` meaning, and cutting a literal prefix short is always safe.
 */
const SPECIAL_CHARS = /[*?[\]{}()!\\@+|]/;

/** The type contract §1 infers for a pattern: glob if it has a glob character, else directory if it ends in `/`, else file. */
export function inferPatternType(pattern: string): PatternType {
  if (INFER_GLOB_CHARS.test(pattern)) return 'glob';
  return pattern.endsWith('/') ? 'directory' : 'file';
}

/** The wildcard-free prefix of a pattern (`/secrets/**` -> `/secrets/`, `*.key` -> ``). */
export function literalPrefix(pattern: string): string {
  const m = SPECIAL_CHARS.exec(pattern);
  return m === null ? pattern : pattern.slice(0, m.index);
}

/** True when the glob only uses `*`, `?` and `/` as special characters (so literal runs are required text). */
export function isSimpleGlob(glob: string): boolean {
  return !/[[\]{}()!\\]/.test(glob);
}

/**
 * True when splitting the glob at `/` yields independent segment patterns: no negation, no escapes, and no
 * `/` inside a `{}`, `()` or `[]` group. Traversal analysis needs this; otherwise it over-approximates.
 */
export function isSegmentSplittable(glob: string): boolean {
  if (glob.startsWith('!') || glob.includes('\\')) return false;
  let depth = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '{' || c === '(' || c === '[') depth++;
    else if ((c === '}' || c === ')' || c === ']') && depth > 0) depth--;
    else if (c === '/' && depth > 0) return false;
  }
  return true;
}
