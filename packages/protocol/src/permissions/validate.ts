// Rule validation (contract §1): every problem names the rule's index, says what is wrong and how to fix it.
import { InvalidArgumentError } from '../errors.js';
import { isPermission } from './level.js';
import { globProblem } from './match.js';
import { hasDotSegment } from './normalize.js';
import { inferPatternType } from './pattern.js';
import { PATTERN_TYPES, PERMISSIONS } from './types.js';
import type { NormalizedRule, PatternType } from './types.js';

function fail(index: number, problem: string): never {
  throw new InvalidArgumentError(`rule ${index}: ${problem}`, { details: { ruleIndex: index } });
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return `${typeof value} ${value}`;
  }
  return `an ${typeof value}`;
}

function isPatternType(value: unknown): value is PatternType {
  return typeof value === 'string' && (PATTERN_TYPES as readonly string[]).includes(value);
}

/** Validates one rule and returns it with its type inferred and its priority defaulted. */
export function validateRule(value: unknown, index: number): NormalizedRule {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    fail(index, `expected an object { pattern, permission, type?, priority? }, got ${describe(value)}`);
  }
  const raw = value as Record<string, unknown>;
  const { pattern, permission, type, priority } = raw;
  if (typeof pattern !== 'string' || pattern.length === 0) {
    fail(index, `pattern must be a non-empty string, got ${describe(pattern)}; e.g. "/docs/" or "**/*.key"`);
  }
  if (!isPermission(permission)) {
    const what =
      permission === undefined ? 'missing permission' : `unknown permission ${describe(permission)}`;
    fail(index, `${what}; expected one of ${PERMISSIONS.join(', ')}`);
  }
  if (type !== undefined && !isPatternType(type)) {
    fail(
      index,
      `unknown type ${describe(type)}; expected one of ${PATTERN_TYPES.join(', ')} (or omit it to infer it from the pattern)`,
    );
  }
  if (priority !== undefined && (typeof priority !== 'number' || !Number.isSafeInteger(priority))) {
    fail(
      index,
      `priority must be an integer, got ${describe(priority)}; use a whole number such as 10 (default 0)`,
    );
  }
  if (pattern.includes('\0'))
    fail(index, `pattern ${JSON.stringify(pattern)} contains a NUL byte; remove it`);
  // Paths never contain `.` or `..` (normalizePath rejects them), so such a rule could never match.
  if (hasDotSegment(pattern.replace(/\/{2,}/g, '/').replace(/(.)\/$/, '$1'))) {
    fail(
      index,
      `pattern ${JSON.stringify(pattern)} contains a "." or ".." segment; write the path from the codebase root, e.g. "/src/**"`,
    );
  }
  const resolvedType = type ?? inferPatternType(pattern);
  if (resolvedType === 'glob') {
    const problem = globProblem(pattern);
    if (problem !== null) {
      fail(index, `pattern ${JSON.stringify(pattern)} ${problem}`);
    }
  }
  return { index, pattern, type: resolvedType, permission, priority: priority ?? 0 };
}

/** Validates a rule list (contract §1); throws InvalidArgumentError with `details.ruleIndex` at the first bad rule. */
export function validateRules(rules: readonly unknown[]): NormalizedRule[] {
  if (!Array.isArray(rules)) {
    throw new InvalidArgumentError(
      `rules must be an array of { pattern, permission, type?, priority? } objects`,
      {
        details: {},
      },
    );
  }
  return rules.map((rule, index) => validateRule(rule, index));
}
