// Resolution order (contract §1): priority > type > specificity > later rule; default deny; the seed examples.
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../src/index.js';

describe('resolution', () => {
  it('denies by default when no rule matches', () => {
    const rs = compileRules([{ pattern: '/docs/', permission: 'read' }]);
    expect(rs.decide('/src/a.ts')).toEqual({ permission: 'none', ruleIndex: null });
    expect(compileRules([]).decide('/')).toEqual({ permission: 'none', ruleIndex: null });
  });

  it('explicit priority beats type, specificity and order', () => {
    const rules = [
      { pattern: '/secrets/key.pem', permission: 'read' }, // file, most specific
      { pattern: '**/*', permission: 'none', priority: 1 }, // glob, least specific, earlier than nothing
    ];
    expect(compileRules(rules).decide('/secrets/key.pem')).toEqual({ permission: 'none', ruleIndex: 1 });
    // Same rules without the priority: the file rule wins, proving the priority is what decided.
    expect(
      compileRules([rules[0], { pattern: '**/*', permission: 'none' }]).permissionOf('/secrets/key.pem'),
    ).toBe('read');
  });

  it('a lower explicit priority loses even to a later rule', () => {
    const rs = compileRules([
      { pattern: '**/*', permission: 'read', priority: 5 },
      { pattern: '/a/', permission: 'write', priority: -1 },
    ]);
    expect(rs.permissionOf('/a/x')).toBe('read');
  });

  it('at equal priority, type decides: file > directory > glob (regardless of order)', () => {
    const file = { pattern: '/a/b.txt', permission: 'view' };
    const dir = { pattern: '/a/', permission: 'write' };
    const glob = { pattern: '/a/**/*.txt', permission: 'none' }; // longest literal prefix would not matter
    for (const rules of [
      [file, dir, glob],
      [glob, dir, file],
      [dir, glob, file],
    ]) {
      const rs = compileRules(rules);
      expect(rs.permissionOf('/a/b.txt')).toBe('view');
      expect(rs.permissionOf('/a/c.txt')).toBe('write');
    }
    expect(compileRules([glob, dir]).permissionOf('/a/c.txt')).toBe('write');
    expect(compileRules([dir, glob]).permissionOf('/a/c.txt')).toBe('write');
  });

  it('at equal priority and type, the longer literal prefix wins (regardless of order)', () => {
    const broad = { pattern: '**/*', permission: 'read' };
    const narrow = { pattern: '/secrets/**', permission: 'none' };
    expect(compileRules([broad, narrow]).permissionOf('/secrets/a')).toBe('none');
    expect(compileRules([narrow, broad]).permissionOf('/secrets/a')).toBe('none');
    // Deeper directory rules are more specific.
    const outer = { pattern: '/a/', permission: 'read' };
    const inner = { pattern: '/a/b/', permission: 'write' };
    expect(compileRules([inner, outer]).permissionOf('/a/b/c')).toBe('write');
    expect(compileRules([outer, inner]).permissionOf('/a/b/c')).toBe('write');
    // The literal prefix runs up to the first wildcard, not just to the last slash.
    expect(
      compileRules([
        { pattern: '/src/foo*', permission: 'write' },
        { pattern: '/src/*.ts', permission: 'view' },
      ]).permissionOf('/src/foo.ts'),
    ).toBe('write');
  });

  it('root-relative and anchored spellings have the same specificity', () => {
    const a = { pattern: 'src/*.ts', permission: 'read' };
    const b = { pattern: '/src/*.ts', permission: 'write' };
    expect(compileRules([a, b]).permissionOf('/src/x.ts')).toBe('write');
    expect(compileRules([b, a]).permissionOf('/src/x.ts')).toBe('read');
  });

  it('when everything else ties, the later rule wins', () => {
    const first = { pattern: '*.log', permission: 'read' };
    const second = { pattern: '*.txt', permission: 'write' };
    const both = { pattern: '/logs/**', permission: 'none' };
    expect(compileRules([first, { pattern: '*.log', permission: 'none' }]).decide('/a.log')).toEqual({
      permission: 'none',
      ruleIndex: 1,
    });
    expect(compileRules([{ pattern: '*.log', permission: 'none' }, first]).decide('/a.log')).toEqual({
      permission: 'read',
      ruleIndex: 1,
    });
    expect(compileRules([second, both]).permissionOf('/logs/a.txt')).toBe('none');
  });

  it('seed 001: file exception beats a tree-hiding glob without any priorities', () => {
    const rs = compileRules([
      { pattern: '**/*', permission: 'read' },
      { pattern: '/secrets/**', permission: 'none' },
      { pattern: '/secrets/public.key', permission: 'read' },
    ]);
    expect(rs.decide('/secrets/public.key')).toEqual({ permission: 'read', ruleIndex: 2 });
    expect(rs.decide('/secrets/private.key')).toEqual({ permission: 'none', ruleIndex: 1 });
    expect(rs.decide('/secrets')).toEqual({ permission: 'none', ruleIndex: 1 });
    expect(rs.decide('/app/main.py')).toEqual({ permission: 'read', ruleIndex: 0 });
  });

  it('seed 002: explicit priorities', () => {
    const rs = compileRules([
      { pattern: '**/*', permission: 'read', priority: 0 },
      { pattern: '/output/**', permission: 'write', priority: 10 },
      { pattern: '**/.env*', permission: 'none', priority: 100 },
      { pattern: '/secrets/**', permission: 'none', priority: 100 },
      { pattern: '**/*.key', permission: 'none', priority: 100 },
      { pattern: '/secrets/public.key', permission: 'read', priority: 200 },
    ]);
    expect(rs.permissionOf('/README.md')).toBe('read');
    expect(rs.permissionOf('/output/log.txt')).toBe('write');
    expect(rs.permissionOf('/output/.env')).toBe('none');
    expect(rs.permissionOf('/.env')).toBe('none');
    expect(rs.permissionOf('/src/config/.env.local')).toBe('none');
    expect(rs.permissionOf('/id.key')).toBe('none');
    expect(rs.permissionOf('/secrets/private.key')).toBe('none');
    expect(rs.permissionOf('/secrets/notes.txt')).toBe('none');
    expect(rs.decide('/secrets/public.key')).toEqual({ permission: 'read', ruleIndex: 5 });
  });

  it('hides the agent-safe secrets at the root as well as deep down', () => {
    const rs = compileRules([
      { pattern: '**/*', permission: 'read' },
      { pattern: '**/secrets/**', permission: 'none', priority: 10 },
      { pattern: '*.pem', permission: 'none', priority: 10 },
      { pattern: '**/.git/**', permission: 'none', priority: 10 },
    ]);
    for (const p of [
      '/secrets',
      '/secrets/a',
      '/x/secrets/a',
      '/a.pem',
      '/x/y/a.pem',
      '/.git',
      '/.git/HEAD',
      '/m/.git/config',
    ]) {
      expect(rs.permissionOf(p), p).toBe('none');
    }
    expect(rs.permissionOf('/x/secretsx/a')).toBe('read');
    expect(rs.permissionOf('/.gitignore')).toBe('read');
  });
});
