// explain (contract §1): which permission applies to a path and which rule decided it.
import { describe, expect, it } from 'vitest';
import { compileRules, explain } from '../../src/index.js';

const RULES = [
  { pattern: '**/*', permission: 'read' },
  { pattern: '/secrets/**', permission: 'none', priority: 100 },
  { pattern: 'secrets/public.key', permission: 'read', priority: 200 },
];

describe('explain', () => {
  it('names the deciding rule with its index, inferred type and default priority', () => {
    expect(explain(RULES, '/secrets/private.key')).toEqual({
      path: '/secrets/private.key',
      permission: 'none',
      rule: { index: 1, pattern: '/secrets/**', type: 'glob', permission: 'none', priority: 100 },
      traversable: false,
    });
    expect(explain(RULES, '/src/a.ts')).toEqual({
      path: '/src/a.ts',
      permission: 'read',
      rule: { index: 0, pattern: '**/*', type: 'glob', permission: 'read', priority: 0 },
      traversable: true,
    });
  });

  it('keeps the pattern as written and reports the normalised path', () => {
    expect(explain(RULES, '//secrets//public.key/')).toMatchObject({
      path: '/secrets/public.key',
      permission: 'read',
      rule: { index: 2, pattern: 'secrets/public.key', type: 'file', priority: 200 },
    });
  });

  it('reports a null rule on default deny, and whether the path is traversable as a directory', () => {
    expect(explain([{ pattern: '/docs/a.md', permission: 'view' }], '/docs')).toEqual({
      path: '/docs',
      permission: 'none',
      rule: null,
      traversable: true,
    });
    expect(explain([], '/')).toEqual({ path: '/', permission: 'none', rule: null, traversable: false });
  });

  it('accepts a compiled rule set and agrees with RuleSet.explain', () => {
    const rs = compileRules(RULES);
    expect(explain(rs, '/secrets')).toEqual(rs.explain('/secrets'));
    expect(rs.explain('/secrets')).toMatchObject({
      permission: 'none',
      traversable: true,
      rule: { index: 1 },
    });
  });

  it('validates the rules', () => {
    expect(() => explain([{ pattern: '', permission: 'read' }], '/a')).toThrow(/rule 0: pattern must be/);
  });
});
