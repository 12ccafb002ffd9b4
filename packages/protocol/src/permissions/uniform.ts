// Whether every path strictly below a directory gets the same permission, decided from the rules alone
// (no listing). The worker asks it before a directory rename: when the moved tree is `write` throughout
// at both its old and its new place, nothing inside can be refused and no attribute the kernel cached
// changes, so neither the per-entry check nor the per-inode invalidation has to walk the tree.
import { ruleMatches } from './compile.js';
import type { CompiledRule } from './compile.js';
import { isWithin } from './match.js';
import { canMatchInside } from './traverse.js';
import type { TraversalContext } from './traverse.js';
import type { Permission } from './types.js';

/** True when `c` matches every path strictly below `dir` (a directory rule at or above it, `x/**`, catch-alls). */
function covers(c: CompiledRule, dir: string): boolean {
  if (c.glob?.matchesAll === true) return true;
  const subtreeRule = c.glob === null ? c.rule.type === 'directory' : c.glob.coversSubtree;
  return subtreeRule && ruleMatches(c, dir);
}

/** True when `c` may match some path strictly below `dir` (over-approximated for globs). */
function mayMatchBelow(
  c: CompiledRule,
  dir: string,
  dirSegments: readonly string[],
  ctx: TraversalContext,
): boolean {
  if (c.glob !== null)
    return c.glob.segments === null || canMatchInside(c.glob.segments, dirSegments, ctx.matchers);
  const target = c.target ?? '/';
  return target !== dir && isWithin(target, dir);
}

/**
 * The permission every path strictly below the normalised directory `dir` resolves to, or null when the
 * rules may decide some of them differently. Exact in the "yes" direction, conservative otherwise: the
 * strongest rule covering the subtree decides every path below that no stronger rule matches, so it and
 * the stronger rules that may match below must all agree (README.md, "Uniform subtrees").
 */
export function computeUniformBelow(ctx: TraversalContext, dir: string): Permission | null {
  const dirSegments = dir === '/' ? [] : dir.slice(1).split('/');
  let seen: Permission | null = null;
  for (const c of ctx.index.ranked) {
    const covering = covers(c, dir);
    if (!covering && !mayMatchBelow(c, dir, dirSegments, ctx)) continue;
    if (seen !== null && seen !== c.rule.permission) return null;
    seen = c.rule.permission;
    if (covering) return seen;
  }
  // No rule covers the subtree: the default (none) decides some paths below.
  return seen === null || seen === 'none' ? 'none' : null;
}
