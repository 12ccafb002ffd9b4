// Compiles validated rules once: ranks them in resolution order (contract §1) and builds the indexes that let
// resolve.ts find the winning rule for a path with a handful of Map lookups instead of a test per rule.
import { directoryTarget, fileTarget, globMatches, isWithin, planGlob } from './match.js';
import type { GlobPlan, StringTest } from './match.js';
import { literalPrefix } from './pattern.js';
import type { Decision, NormalizedRule, PatternType } from './types.js';

/** A rule ready for matching, with its place in the resolution order. */
export interface CompiledRule {
  readonly rule: NormalizedRule;
  /** Position in resolution order: 0 is the strongest rule; the first matching rule decides. */
  readonly rank: number;
  /** Length of the wildcard-free prefix of the canonical pattern (the third tie-break). */
  readonly specificity: number;
  /** File and directory rules: the normalised path they name. */
  readonly target: string | null;
  /** Glob rules: how the glob is matched and indexed. */
  readonly glob: GlobPlan | null;
  /** The shared, frozen decision this rule produces. */
  readonly decision: Decision;
}

/** One glob in an index bucket; buckets are sorted by rank so a scan can stop at the current best. */
export interface GlobEntry {
  readonly rank: number;
  /** Tested against the basename (true) or the path without its leading `/` (false). */
  readonly onBasename: boolean;
  /** Text the tested string must contain; a cheap filter in front of the regex. */
  readonly needs: string | null;
  readonly test: StringTest;
}

/**
 * One path of the rule tree: file and directory rules naming it and globs whose literal base it is. Only
 * paths that some rule names exist, so a path walk stops as soon as it leaves the tree. File rules live here
 * rather than in a Map keyed by the whole path so that a miss never has to hash the whole path.
 */
export interface TreeNode {
  /** Best rank of a file rule naming exactly this path (`Infinity` when none). */
  fileRank: number;
  /** Best rank of a directory rule naming this directory (`Infinity` when none). */
  dirRank: number;
  /** Globs whose literal base directory this is, sorted by rank (tested on paths at or below it). */
  readonly globs: GlobEntry[];
  /** Child directories by name, or null for a leaf (saves a Map lookup per remaining segment). */
  children: Map<string, TreeNode> | null;
}

/** Everything resolve.ts and traverse.ts need, built once per rule set. */
export interface RuleIndex {
  /** Rules in resolution order. */
  readonly ranked: readonly CompiledRule[];
  /** File rules, directory rules and anchored globs (by literal base directory), as a tree rooted at `/`. */
  readonly tree: TreeNode;
  /** Unanchored globs with a literal segment, keyed by it: tested only on paths containing that segment. */
  readonly bySegment: ReadonlyMap<string, readonly GlobEntry[]>;
  /**
   * Cheap pre-check for `bySegment`: bit `charCode & 31` of word `length & 31` is set for every key, so a
   * segment whose (length, first character) pair is unset cannot be a key and is neither sliced nor hashed.
   */
  readonly segmentFilter: Uint32Array;
  /** `*.ext` basename globs keyed by extension. */
  readonly byExtension: ReadonlyMap<string, readonly GlobEntry[]>;
  /** Every other glob, tested against every path (in rank order, stopping at the current best). */
  readonly generic: readonly GlobEntry[];
}

/** The decision when no rule matches (contract §1 default deny). */
export const DEFAULT_DENY: Decision = Object.freeze({ permission: 'none', ruleIndex: null });

const TYPE_RANK: Readonly<Record<PatternType, number>> = { file: 3, directory: 2, glob: 1 };

function canonicalPattern(rule: NormalizedRule, target: string | null, glob: GlobPlan | null): string {
  if (rule.type === 'file') return target ?? rule.pattern;
  if (rule.type === 'directory') return target === '/' ? '/' : `${target ?? rule.pattern}/`;
  // Root-relative globs count their implicit leading `/`, so `src/*.ts` ties with `/src/*.ts`.
  const anchoredWithoutSlash =
    glob !== null && glob.scope === 'path' && !rule.pattern.startsWith('/') && !rule.pattern.startsWith('**');
  return anchoredWithoutSlash ? `/${rule.pattern}` : rule.pattern;
}

/** Compares two rules in resolution order: priority, then type, then specificity, then later-wins. */
function compareStrength(
  a: { rule: NormalizedRule; specificity: number },
  b: { rule: NormalizedRule; specificity: number },
): number {
  return (
    b.rule.priority - a.rule.priority ||
    TYPE_RANK[b.rule.type] - TYPE_RANK[a.rule.type] ||
    b.specificity - a.specificity ||
    b.rule.index - a.rule.index
  );
}

/** True when a compiled rule matches a normalised path (the per-rule truth the indexes must agree with). */
export function ruleMatches(compiled: CompiledRule, path: string): boolean {
  if (compiled.glob !== null) return globMatches(compiled.glob, path);
  if (compiled.rule.type === 'file') return path === compiled.target;
  return isWithin(path, compiled.target ?? '/');
}

function push<V>(map: Map<string, V[]>, key: string, value: V): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

/** Ranks validated rules and builds the lookup indexes. */
export function compileIndex(rules: readonly NormalizedRule[]): RuleIndex {
  const unranked = rules.map((rule) => {
    const target =
      rule.type === 'file'
        ? fileTarget(rule.pattern)
        : rule.type === 'directory'
          ? directoryTarget(rule.pattern)
          : null;
    const glob = rule.type === 'glob' ? planGlob(rule.pattern) : null;
    const specificity = literalPrefix(canonicalPattern(rule, target, glob)).length;
    return { rule, target, glob, specificity };
  });
  unranked.sort(compareStrength);
  const ranked: CompiledRule[] = unranked.map((r, rank) => ({
    ...r,
    rank,
    decision: Object.freeze({ permission: r.rule.permission, ruleIndex: r.rule.index }),
  }));

  const tree: TreeNode = { fileRank: Infinity, dirRank: Infinity, globs: [], children: null };
  const nodeAt = (dir: string): TreeNode => {
    let node = tree;
    if (dir === '/') return node;
    for (const name of dir.slice(1).split('/')) {
      node.children ??= new Map();
      let child = node.children.get(name);
      if (child === undefined) {
        child = { fileRank: Infinity, dirRank: Infinity, globs: [], children: null };
        node.children.set(name, child);
      }
      node = child;
    }
    return node;
  };
  const bySegment = new Map<string, GlobEntry[]>();
  const byExtension = new Map<string, GlobEntry[]>();
  const generic: GlobEntry[] = [];
  // Ranks are visited in increasing order, so every bucket ends up sorted and `has` keeps the best rank.
  for (const c of ranked) {
    if (c.glob === null) {
      if (c.target === null) continue;
      const node = nodeAt(c.target);
      if (c.rule.type === 'file') node.fileRank = Math.min(node.fileRank, c.rank);
      else node.dirRank = Math.min(node.dirRank, c.rank);
      continue;
    }
    const g = c.glob;
    const entry = (test: StringTest): GlobEntry => ({
      rank: c.rank,
      onBasename: g.scope === 'basename',
      // The regex is the expensive part; a substring check in front only pays off when a regex runs.
      needs: test === g.bucketTest && test !== g.test ? null : g.matchesAll ? null : g.requiredText,
      test,
    });
    if (g.scope === 'path' && g.baseDir !== '/') nodeAt(g.baseDir).globs.push(entry(g.bucketTest));
    else if (g.scope === 'path' && g.requiredSegment !== null)
      push(bySegment, g.requiredSegment, entry(g.bucketTest));
    else if (g.extKey !== null) push(byExtension, g.extKey, entry(g.test));
    else generic.push(entry(g.test));
  }
  const segmentFilter = new Uint32Array(32);
  for (const key of bySegment.keys()) segmentFilter[key.length & 31]! |= 1 << (key.charCodeAt(0) & 31);
  return { ranked, tree, bySegment, segmentFilter, byExtension, generic };
}
