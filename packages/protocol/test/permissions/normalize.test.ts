// Path normalisation: canonical paths only; `.`/`..`/NUL are caller bugs and are rejected, never resolved.
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, compileRules, normalizePath } from '../../src/index.js';

describe('normalizePath', () => {
  it.each([
    ['/', '/'],
    ['//', '/'],
    ['/a', '/a'],
    ['/a/', '/a'],
    ['//a//b///c/', '/a/b/c'],
    ['/.env', '/.env'],
    ['/a/..b/c.', '/a/..b/c.'],
    ['/a/.../b', '/a/.../b'],
  ])('%s -> %s', (input, output) => {
    expect(normalizePath(input)).toBe(output);
  });

  it.each([
    ['a parent segment', '/a/../b'],
    ['a trailing parent segment', '/a/..'],
    ['a dot segment', '/a/./b'],
    ['a trailing dot segment', '/a/.'],
    ['only a dot', '/.'],
    ['a NUL byte', '/a\0b'],
    ['a relative path', 'a/b'],
    ['an empty path', ''],
  ])('rejects %s', (_kind, input) => {
    expect(() => normalizePath(input)).toThrow(InvalidArgumentError);
  });

  it('is applied by the rule set, so equivalent spellings get the same answer', () => {
    const rs = compileRules([{ pattern: '/docs/', permission: 'read' }]);
    expect(rs.permissionOf('//docs//a.md')).toBe('read');
    expect(rs.permissionOf('/docs/')).toBe('read');
    expect(rs.decide('/docs///')).toEqual({ permission: 'read', ruleIndex: 0 });
  });

  it('rule set queries reject paths with dot segments even when cached for another spelling', () => {
    const rs = compileRules([{ pattern: '**/*', permission: 'read' }]);
    expect(rs.permissionOf('/secrets/a')).toBe('read');
    expect(() => rs.permissionOf('/public/../secrets/a')).toThrow(InvalidArgumentError);
    expect(() => rs.isTraversable('/a/./b')).toThrow(InvalidArgumentError);
    expect(() => rs.explain('/a\0')).toThrow(InvalidArgumentError);
    expect(() => rs.visibility('x', { isDirectory: false })).toThrow(InvalidArgumentError);
  });
});
