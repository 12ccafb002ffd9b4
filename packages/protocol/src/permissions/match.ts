// How one rule matches one normalised path (contract §1 matching), and the static plan of a glob that lets the
// compiled rule set index it instead of testing every glob against every path.
import picomatch from 'picomatch';
import { collapseSlashes } from './normalize.js';
import { isSegmentSplittable, isSimpleGlob, literalPrefix } from './pattern.js';

/** picomatch options used everywhere: dotfiles match, POSIX separators on every platform. */
export const GLOB_OPTIONS: Readonly<picomatch.PicomatchOptions> = Object.freeze({
  dot: true,
  windows: false,
});

/** A predicate over the string a glob is tested against (a basename or a root-relative path). */
export type StringTest = (s: string) => boolean;

/** What a glob is tested against, and what every string it matches must look like. */
export interface GlobPlan {
  /** `basename`: tested against the last path component; `path`: against the path without its leading `/`. */
  readonly scope: 'basename' | 'path';
  /** The glob actually handed to picomatch (after the rewrites documented in README.md). */
  readonly source: string;
  readonly test: StringTest;
  /**
   * Equivalent to `test` for strings that satisfy the plan's index key (below `baseDir`, or containing
   * `requiredSegment`), and often trivial there: `/secrets/**` matches everything below `/secrets`.
   */
  readonly bucketTest: StringTest;
  /** Absolute directory that every matching path equals or lies below (`/` when nothing narrower is known). */
  readonly baseDir: string;
  /** Path scope: a literal segment that every matching path contains, or null. */
  readonly requiredSegment: string | null;
  /** Basename scope, `*<literal>` globs only: the text after the literal's last `.` (`*.key` -> `key`). */
  readonly extKey: string | null;
  /** Text that every matching string contains (longest literal run of a simple glob), or null. */
  readonly requiredText: string | null;
  /** `/`-separated segment patterns relative to the root (`**` = any depth), or null when not splittable. */
  readonly segments: readonly string[] | null;
  /** True when matching a directory implies matching everything below it (`x/**`, catch-alls). */
  readonly coversSubtree: boolean;
  /** True when it matches every path except the root. */
  readonly matchesAll: boolean;
}

/**
 * A matcher with picomatch's exact semantics (non-empty input; equal to the glob, or the regex matches) but
 * without the per-call result object picomatch's own matcher allocates, which costs ~10x on the hot path.
 */
export function compileGlob(glob: string): StringTest {
  const re = picomatch.makeRe(glob, GLOB_OPTIONS);
  return (s) => s.length > 0 && (s === glob || re.test(s));
}

/** The normalised absolute path a file rule names (`docs/a.md` -> `/docs/a.md`). */
export function fileTarget(pattern: string): string {
  return collapseSlashes(pattern.startsWith('/') ? pattern : `/${pattern}`);
}

/** The normalised absolute directory a directory rule names (`docs/` -> `/docs`, `/` -> `/`). */
export function directoryTarget(pattern: string): string {
  return fileTarget(pattern);
}

/** True when `path` is `dir` or lies below it (both normalised). */
export function isWithin(path: string, dir: string): boolean {
  if (dir === '/') return true;
  return (
    path === dir || (path.length > dir.length && path.charCodeAt(dir.length) === 47 && path.startsWith(dir))
  );
}

/** The last component of a normalised path (`` for the root). */
export function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

function longestLiteralRun(glob: string): string | null {
  let best = '';
  for (const run of glob.split(/[*?/]/)) if (run.length > best.length) best = run;
  return best.length > 0 ? best : null;
}

const always: StringTest = () => true;

/** True when the text has no special glob character at all. */
function isLiteral(text: string): boolean {
  return text.length > 0 && literalPrefix(text) === text;
}

/** The cheapest exact test for a slash-free glob: string operations for `*.key` / `.env*` shapes. */
function basenameTest(glob: string): StringTest {
  if (glob === '*' || glob === '**') return always;
  const tail = glob.slice(1);
  if (glob.startsWith('*') && isLiteral(tail)) return (s) => s.endsWith(tail);
  const head = glob.slice(0, -1);
  if (glob.endsWith('*') && isLiteral(head)) return (s) => s.startsWith(head);
  return compileGlob(glob);
}

function planBasename(glob: string): GlobPlan {
  const negated = glob.startsWith('!');
  const simple = isSimpleGlob(glob);
  const matchesAll = glob === '*' || glob === '**';
  // `*.key` style: the basename must end with the literal, so its extension is known.
  const suffix = simple && glob.startsWith('*') && !/[*?]/.test(glob.slice(1)) ? glob.slice(1) : null;
  const extKey = suffix !== null && suffix.includes('.') ? suffix.slice(suffix.lastIndexOf('.') + 1) : null;
  const test = basenameTest(glob);
  return {
    scope: 'basename',
    source: glob,
    test,
    bucketTest: test,
    baseDir: '/',
    requiredSegment: null,
    extKey,
    requiredText: simple && !negated ? longestLiteralRun(glob) : null,
    segments: isSegmentSplittable(glob) ? ['**', glob] : null,
    coversSubtree: matchesAll,
    matchesAll,
  };
}

/** The static plan of a validated glob pattern. */
export function planGlob(pattern: string): GlobPlan {
  let glob = pattern.replace(/\/{2,}/g, '/');
  // A glob ending in `/` names directories; like a directory rule it covers them and everything below.
  if (glob.length > 1 && glob.endsWith('/')) glob += '**';
  // No `/` at all: matches the last component at any depth, like .gitignore.
  if (!glob.includes('/')) return planBasename(glob);
  // Anchored (`/x/*`) and root-relative (`x/*`) globs are both matched against the path below the root.
  const rel = glob.startsWith('/') ? glob.slice(1) : glob;
  // `**/G` with a slash-free G is exactly the basename glob G; the basename index is much cheaper.
  if (rel.startsWith('**/') && !rel.slice(3).includes('/')) return planBasename(rel.slice(3));

  const negated = rel.startsWith('!');
  const simple = isSimpleGlob(rel);
  const matchesAll = rel === '**';
  const coversSubtree = !negated && (matchesAll || rel.endsWith('/**'));
  let test: StringTest = matchesAll ? always : compileGlob(rel);
  // `x/**` must also match `x` itself so hiding a tree hides its name. picomatch 4 does that for `a/**` and
  // `**/a/**` but not when the last segment before `/**` ends in a wildcard (`src/*/**` misses `src/lib`),
  // so the parent is always tested explicitly.
  if (coversSubtree && !matchesAll) {
    const full = test;
    const parent = compileGlob(rel.slice(0, -3));
    test = (s) => full(s) || parent(s);
  }
  const literal = negated ? '' : literalPrefix(rel);
  const slash = literal.lastIndexOf('/');
  let requiredSegment: string | null = null;
  if (simple && !negated) {
    for (const seg of rel.split('/')) {
      if (seg.length > 0 && !/[*?]/.test(seg) && seg.length > (requiredSegment?.length ?? 0))
        requiredSegment = seg;
    }
  }
  // Inside its bucket, `lit/**` (bucketed under /lit) and `**/seg/**` (bucketed by seg) always match.
  const inner = rel.slice(3, -3);
  const bucketTest =
    !negated &&
    (isLiteral(rel.slice(0, -3)) || (rel.startsWith('**/') && isLiteral(inner) && !inner.includes('/'))) &&
    rel.endsWith('/**')
      ? always
      : test;
  return {
    scope: 'path',
    source: rel,
    test,
    bucketTest,
    baseDir: slash <= 0 ? '/' : `/${literal.slice(0, slash)}`,
    requiredSegment,
    extKey: null,
    requiredText: simple && !negated ? longestLiteralRun(rel) : null,
    segments: isSegmentSplittable(rel) ? rel.split('/') : null,
    coversSubtree,
    matchesAll,
  };
}

/** Tests a glob plan against a normalised path. Globs never match the root: it has no name to match. */
export function globMatches(plan: GlobPlan, path: string): boolean {
  if (path === '/') return false;
  return plan.test(plan.scope === 'basename' ? basename(path) : path.slice(1));
}

const FIX =
  'balance brackets and braces, escape special characters with "\\", or set type "file" for a literal name';

/** Why a glob pattern is unusable (phrased to follow the quoted pattern), or null when it compiles. */
export function globProblem(pattern: string): string | null {
  const glob = pattern.replace(/\/{2,}/g, '/');
  if (/^\/*$/.test(glob)) {
    return 'names only the root, which globs never match; use { "pattern": "/", "type": "directory" } to match everything';
  }
  try {
    // strictBrackets turns unbalanced brackets, braces and parens into errors instead of literal characters.
    const re = picomatch.makeRe(glob.startsWith('/') ? glob.slice(1) : glob, {
      ...GLOB_OPTIONS,
      strictBrackets: true,
    });
    // picomatch gives up on some malformed globs (`a\`, `[z-a]`) by returning a regex that matches nothing.
    if (re.source === '$^') return `does not compile (it could never match anything); ${FIX}`;
  } catch (err) {
    return `does not compile (${err instanceof Error ? err.message : String(err)}); ${FIX}`;
  }
  return null;
}
