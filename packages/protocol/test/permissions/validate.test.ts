// Rule validation and type inference (contract §1): every invalid kind is rejected with the rule's index.
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, compileRules, inferPatternType, validateRules } from '../../src/index.js';

function rejection(rules: unknown[]): InvalidArgumentError {
  try {
    validateRules(rules);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidArgumentError);
    return err as InvalidArgumentError;
  }
  throw new Error('expected the rules to be rejected');
}

const ok = { pattern: '**/*', permission: 'read' };

describe('inferPatternType', () => {
  it.each([
    ['**/*.py', 'glob'],
    ['/secrets/**', 'glob'],
    ['file?.txt', 'glob'],
    ['/a/[ab].txt', 'glob'],
    ['/a/{x,y}.txt', 'glob'],
    ['!*.key', 'glob'],
    ['/docs/', 'directory'],
    ['docs/', 'directory'],
    ['/', 'directory'],
    ['/config.yaml', 'file'],
    ['README.md', 'file'],
    ['/a/@(x|y)', 'file'],
  ])('%s is a %s', (pattern, type) => {
    expect(inferPatternType(pattern)).toBe(type);
  });
});

describe('validateRules', () => {
  it('infers the type and defaults the priority, keeping the pattern as written', () => {
    expect(
      validateRules([
        { pattern: 'docs/', permission: 'view' },
        { pattern: '/a.txt', permission: 'write', priority: 5 },
        { pattern: '/x', permission: 'none', type: 'glob' },
      ]),
    ).toEqual([
      { index: 0, pattern: 'docs/', type: 'directory', permission: 'view', priority: 0 },
      { index: 1, pattern: '/a.txt', type: 'file', permission: 'write', priority: 5 },
      { index: 2, pattern: '/x', type: 'glob', permission: 'none', priority: 0 },
    ]);
  });

  it('exposes the normalised rules on the compiled rule set', () => {
    expect(compileRules([{ pattern: '*.key', permission: 'none' }]).rules).toEqual([
      { index: 0, pattern: '*.key', type: 'glob', permission: 'none', priority: 0 },
    ]);
  });

  it('accepts an empty rule list (everything is denied)', () => {
    expect(validateRules([])).toEqual([]);
  });

  it.each<[string, unknown, RegExp]>([
    [
      'a non-object',
      'read everything',
      /^rule 1: expected an object \{ pattern, permission, type\?, priority\? \}, got "read everything"/,
    ],
    ['null', null, /^rule 1: expected an object .* got null/],
    ['an array', ['**', 'read'], /^rule 1: expected an object .* got an array/],
    [
      'an unknown permission',
      { pattern: '/a', permission: 'rw' },
      /^rule 1: unknown permission "rw"; expected one of none, view, read, write$/,
    ],
    [
      'a missing permission',
      { pattern: '/a' },
      /^rule 1: missing permission; expected one of none, view, read, write$/,
    ],
    [
      'an unknown type',
      { pattern: '/a', permission: 'read', type: 'folder' },
      /^rule 1: unknown type "folder"; expected one of glob, directory, file/,
    ],
    [
      'an empty pattern',
      { pattern: '', permission: 'read' },
      /^rule 1: pattern must be a non-empty string, got ""; e\.g\./,
    ],
    ['a missing pattern', { permission: 'read' }, /^rule 1: pattern must be a non-empty string, got nothing/],
    [
      'a non-string pattern',
      { pattern: 7, permission: 'read' },
      /^rule 1: pattern must be a non-empty string, got number 7/,
    ],
    [
      'a fractional priority',
      { pattern: '/a', permission: 'read', priority: 1.5 },
      /^rule 1: priority must be an integer, got number 1\.5; use a whole number/,
    ],
    [
      'a string priority',
      { pattern: '/a', permission: 'read', priority: '10' },
      /^rule 1: priority must be an integer, got "10"/,
    ],
    [
      'an infinite priority',
      { pattern: '/a', permission: 'read', priority: Infinity },
      /^rule 1: priority must be an integer/,
    ],
    [
      'an unbalanced brace',
      { pattern: '/src/{a,b', permission: 'read' },
      /^rule 1: pattern "\/src\/\{a,b" does not compile \(Missing closing: "\}".*\); balance brackets/,
    ],
    [
      'an unbalanced bracket',
      { pattern: '**/[ab', permission: 'read' },
      /^rule 1: pattern "\*\*\/\[ab" does not compile/,
    ],
    [
      'an unbalanced paren',
      { pattern: '*(a', permission: 'read' },
      /^rule 1: pattern "\*\(a" does not compile/,
    ],
    [
      'a glob that can never match',
      { pattern: '/a/[z-a]', permission: 'read' },
      /^rule 1: pattern "\/a\/\[z-a\]" does not compile \(it could never match anything\)/,
    ],
    [
      'a root-only glob',
      { pattern: '/', permission: 'read', type: 'glob' },
      /^rule 1: pattern "\/" names only the root, which globs never match; use \{ "pattern": "\/", "type": "directory" \}/,
    ],
    [
      'a ".." segment',
      { pattern: '/src/../secrets/', permission: 'read' },
      /^rule 1: pattern "\/src\/\.\.\/secrets\/" contains a "\." or "\.\." segment; write the path from the codebase root/,
    ],
    [
      'a "." segment in a glob',
      { pattern: './src/**', permission: 'read' },
      /^rule 1: pattern "\.\/src\/\*\*" contains a "\." or "\.\." segment/,
    ],
    [
      'a NUL byte',
      { pattern: '/a\0b', permission: 'read' },
      /^rule 1: pattern "\/a\\u0000b" contains a NUL byte/,
    ],
  ])('rejects %s, naming the index', (_kind, rule, message) => {
    const err = rejection([ok, rule, ok]);
    expect(err.message).toMatch(message);
    expect(err.details).toEqual({ ruleIndex: 1 });
    expect(err.code).toBe('AF_INVALID_ARGUMENT');
  });

  it('reports the first invalid rule', () => {
    const err = rejection([ok, ok, { pattern: '/a', permission: 'bad' }, { pattern: '' }]);
    expect(err.details).toEqual({ ruleIndex: 2 });
    expect(err.message).toMatch(/^rule 2: /);
  });

  it('rejects a non-array rule list', () => {
    expect(() => validateRules('nope' as unknown as unknown[])).toThrow(InvalidArgumentError);
  });

  it('compileRules validates too', () => {
    expect(() => compileRules([{ pattern: '/a', permission: 'rw' }])).toThrow(
      /rule 0: unknown permission "rw"/,
    );
  });

  it('accepts zero, negative and large integer priorities and a literal name with glob characters as a file', () => {
    const rules = validateRules([
      { pattern: '/a', permission: 'read', priority: -3 },
      { pattern: '/b', permission: 'read', priority: 0 },
      { pattern: '/c', permission: 'read', priority: 1e9 },
      { pattern: '/weird[1].txt', permission: 'read', type: 'file' },
    ]);
    expect(rules.map((r) => r.priority)).toEqual([-3, 0, 1e9, 0]);
    expect(compileRules(rules).permissionOf('/weird[1].txt')).toBe('read');
    expect(compileRules(rules).permissionOf('/weird1.txt')).toBe('none');
  });
});
