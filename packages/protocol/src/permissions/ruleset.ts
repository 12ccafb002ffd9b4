// The compiled permission engine: one immutable rule set with per-path memoisation. Changing rules means
// compiling a new RuleSet (or clearing this one's caches), never mutating it.
import { compileIndex, DEFAULT_DENY } from './compile.js';
import type { RuleIndex } from './compile.js';
import { atLeast } from './level.js';
import { normalizePath } from './normalize.js';
import { BoundedCache } from './cache.js';
import { resolveRank } from './resolve.js';
import { buildExceptionIndex, computeTraversable, SegmentMatchers } from './traverse.js';
import type { TraversalContext } from './traverse.js';
import { computeUniformBelow } from './uniform.js';
import { validateRules } from './validate.js';
import type { Decision, Explanation, NormalizedRule, Permission, Visibility } from './types.js';

/** Options for compileRules. */
export interface RuleSetOptions {
  /**
   * Maximum number of memoised per-path decisions (and, separately, directory traversability answers).
   * Default 100,000 (a few MB); 0 disables memoisation.
   */
  readonly cacheSize?: number;
}

/** Options for RuleSet.visibility. */
export interface VisibilityOptions {
  /** Whether the path is a directory (only directories can be visible through traversability). */
  readonly isDirectory: boolean;
}

const DEFAULT_CACHE_SIZE = 100_000;

/** A validated, indexed rule set answering permission questions about codebase paths. */
export class RuleSet {
  /** The rules as validated: type inferred, priority defaulted, in input order (`rules[i].index === i`). */
  readonly rules: readonly NormalizedRule[];
  readonly #index: RuleIndex;
  readonly #decisions: BoundedCache<Decision>;
  readonly #traversals: BoundedCache<boolean>;
  readonly #traversal: TraversalContext;

  /** Validates and compiles `rules` (same as compileRules); throws InvalidArgumentError naming the bad rule. */
  constructor(rules: readonly unknown[], options: RuleSetOptions = {}) {
    this.rules = Object.freeze(validateRules(rules).map((r) => Object.freeze(r)));
    this.#index = compileIndex(this.rules);
    const cacheSize = options.cacheSize ?? DEFAULT_CACHE_SIZE;
    this.#decisions = new BoundedCache({ capacity: cacheSize });
    this.#traversals = new BoundedCache({ capacity: cacheSize });
    this.#traversal = {
      index: this.#index,
      exceptions: buildExceptionIndex(this.#index.ranked),
      matchers: new SegmentMatchers(),
      decide: (path) => this.decide(path),
      isTraversable: (path) => this.isTraversable(path),
    };
  }

  /** The winning rule's permission and index for a path (memoised; throws for invalid paths). */
  decide(path: string): Decision {
    const cached = this.#decisions.get(path);
    if (cached !== undefined) return cached;
    const decision = this.decideUncached(normalizePath(path));
    this.#decisions.set(path, decision);
    return decision;
  }

  /** decide() without the memo, for an already normalised path (benchmarks and reference checks). */
  decideUncached(normalizedPath: string): Decision {
    const rank = resolveRank(this.#index, normalizedPath);
    return this.#index.ranked[rank]?.decision ?? DEFAULT_DENY;
  }

  /** The permission that applies to a path. */
  permissionOf(path: string): Permission {
    return this.decide(path).permission;
  }

  /** Whether a directory can be entered and listed: its own permission is view+, or something inside may be. */
  isTraversable(dirPath: string): boolean {
    const cached = this.#traversals.get(dirPath);
    if (cached !== undefined) return cached;
    const answer = computeTraversable(this.#traversal, normalizePath(dirPath));
    this.#traversals.set(dirPath, answer);
    return answer;
  }

  /**
   * The permission of every path strictly below directory `dirPath` when the rules decide them all alike,
   * else null (conservative: null may also mean "could not tell").
   */
  uniformBelow(dirPath: string): Permission | null {
    return computeUniformBelow(this.#traversal, normalizePath(dirPath));
  }

  /** `hidden` when the path's permission is none and it is not a traversable directory, else `visible`. */
  visibility(path: string, options: VisibilityOptions): Visibility {
    if (atLeast(this.permissionOf(path), 'view')) return 'visible';
    return options.isDirectory && this.isTraversable(path) ? 'visible' : 'hidden';
  }

  /** Which permission applies to a path and which rule decided it (null rule = default deny). */
  explain(path: string): Explanation {
    const normalized = normalizePath(path);
    const { permission, ruleIndex } = this.decide(normalized);
    return {
      path: normalized,
      permission,
      rule: ruleIndex === null ? null : (this.rules[ruleIndex] ?? null),
      traversable: this.isTraversable(normalized),
    };
  }

  /** Drops every memoised answer (they are only ever derived from the immutable rules). */
  clearCache(): void {
    this.#decisions.clear();
    this.#traversals.clear();
  }
}

/** Validates rules (contract §1) and compiles them into a RuleSet; throws InvalidArgumentError naming the bad rule. */
export function compileRules(rules: readonly unknown[], options: RuleSetOptions = {}): RuleSet {
  return new RuleSet(rules, options);
}
