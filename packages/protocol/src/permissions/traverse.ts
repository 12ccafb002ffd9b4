// Traversability of directories whose own permission is below `view` (contract §1 "Directories and exceptions";
// the exact rule is in README.md). A directory is traversable when something strictly inside it may be
// visible. Exceptions named by file/directory rules are checked exactly; globs are checked by whether they
// can match below the directory at all and are not shadowed there by a stronger rule covering the subtree.
import { ruleMatches } from './compile.js';
import type { CompiledRule, RuleIndex } from './compile.js';
import { atLeast } from './level.js';
import { compileGlob, isWithin } from './match.js';
import type { StringTest } from './match.js';
import type { Decision } from './types.js';

/** Compiles (once per rule set) the single-segment matchers that traversal analysis needs. */
export class SegmentMatchers {
  readonly #cache = new Map<string, StringTest>();

  /** The matcher for one `/`-free segment pattern. */
  get(segment: string): StringTest {
    let test = this.#cache.get(segment);
    if (test === undefined) {
      test = compileGlob(segment);
      this.#cache.set(segment, test);
    }
    return test;
  }
}

/**
 * Strict ancestors -> paths named by file/directory rules granting at least `view`. These are the exact
 * exception candidates: `/secrets/public.key` is listed under `/` and `/secrets`.
 */
export function buildExceptionIndex(ranked: readonly CompiledRule[]): Map<string, string[]> {
  const byAncestor = new Map<string, string[]>();
  for (const c of ranked) {
    if (c.target === null || c.target === '/' || !atLeast(c.rule.permission, 'view')) continue;
    for (let i = c.target.lastIndexOf('/'); i >= 0; i = c.target.lastIndexOf('/', i - 1)) {
      const ancestor = i === 0 ? '/' : c.target.slice(0, i);
      const list = byAncestor.get(ancestor);
      if (list === undefined) byAncestor.set(ancestor, [c.target]);
      else if (!list.includes(c.target)) list.push(c.target);
      if (i === 0) break;
    }
  }
  return byAncestor;
}

/**
 * True when a path strictly below the directory `dirSegments` can match the segment patterns (`**` = any
 * number of segments). Simulates the glob as an automaton over the directory's segments; if any state is
 * left with patterns still to match, one more segment (or more) can complete a match.
 */
export function canMatchInside(
  segments: readonly string[],
  dirSegments: readonly string[],
  matchers: SegmentMatchers,
): boolean {
  const closure = (states: Set<number>): Set<number> => {
    for (const s of states) if (segments[s] === '**') states.add(s + 1);
    return states;
  };
  let states = closure(new Set([0]));
  for (const name of dirSegments) {
    const next = new Set<number>();
    for (const s of states) {
      const seg = segments[s];
      if (seg === undefined) continue;
      if (seg === '**') next.add(s);
      else if (matchers.get(seg)(name)) next.add(s + 1);
    }
    states = closure(next);
    if (states.size === 0) return false;
  }
  for (const s of states) if (s < segments.length) return true;
  return false;
}

/** What traversal analysis asks of the rule set (answers are cached by the caller). */
export interface TraversalContext {
  readonly index: RuleIndex;
  readonly exceptions: ReadonlyMap<string, readonly string[]>;
  readonly matchers: SegmentMatchers;
  readonly decide: (path: string) => Decision;
  readonly isTraversable: (path: string) => boolean;
}

/** Whether the normalised directory `dir` can be entered and listed (README.md, "Traversability"). */
export function computeTraversable(ctx: TraversalContext, dir: string): boolean {
  if (atLeast(ctx.decide(dir).permission, 'view')) return true;

  // (a) Exact: a file/directory rule names a path inside `dir` that really is visible (or is itself a
  // traversable directory, e.g. a directory exception whose own entry is overridden by a file rule).
  for (const target of ctx.exceptions.get(dir) ?? []) {
    if (atLeast(ctx.decide(target).permission, 'view') || ctx.isTraversable(target)) return true;
  }

  // (b) Over-approximate: the strongest rule matching all of `dir`'s subtree (a directory rule, `x/**`, a
  // catch-all) decides every path inside that no stronger rule matches, so only rules ranked at or above it
  // can make something inside visible. Among those, a `view`+ glob that can match below `dir`, or a `view`+
  // directory rule covering `dir`, makes it traversable.
  const dirSegments = dir === '/' ? [] : dir.slice(1).split('/');
  for (const c of ctx.index.ranked) {
    const covering =
      c.glob?.matchesAll === true ||
      ((c.glob === null ? c.rule.type === 'directory' : c.glob.coversSubtree) && ruleMatches(c, dir));
    if (atLeast(c.rule.permission, 'view')) {
      if (c.glob === null) {
        if (c.rule.type === 'directory' && isWithin(dir, c.target ?? '/')) return true;
      } else if (c.glob.segments === null || canMatchInside(c.glob.segments, dirSegments, ctx.matchers)) {
        return true;
      }
    }
    // Everything ranked below a covering rule is shadowed inside `dir`.
    if (covering) return false;
  }
  return false;
}
