// One-shot explanation for users debugging a denial (contract §1 `explain`).
import { compileRules, RuleSet } from './ruleset.js';
import type { Explanation } from './types.js';

/** Which permission applies to `path` under `rules` (raw rules or a compiled RuleSet) and which rule decided it. */
export function explain(rules: readonly unknown[] | RuleSet, path: string): Explanation {
  const ruleSet = rules instanceof RuleSet ? rules : compileRules(rules, { cacheSize: 0 });
  return ruleSet.explain(path);
}
