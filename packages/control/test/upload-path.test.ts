import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '@agentfense/protocol';
import { splitCodebasePath } from '../src/index.js';

describe('codebase path validation', () => {
  it.each([
    ['README.md', ['README.md']],
    ['src/app.py', ['src', 'app.py']],
    ['.hidden/..dots/...', ['.hidden', '..dots', '...']],
    ['with space/ünïcode', ['with space', 'ünïcode']],
    ['back\\slash', ['back\\slash']],
  ])('accepts %j', (path, segments) => {
    expect(splitCodebasePath(path)).toEqual(segments);
  });

  it.each([
    ['', /must not be empty/],
    ['/abs/path', /relative to the codebase root/],
    ['../up', /"\." or "\.\." components/],
    ['a/../b', /"\." or "\.\." components/],
    ['a/./b', /"\." or "\.\." components/],
    ['.', /"\." or "\.\." components/],
    ['a//b', /empty component/],
    ['a/', /empty component/],
    ['nul\0byte', /NUL/],
    [`${'a'.repeat(256)}`, /longer than 255/],
    [`${'abc/'.repeat(1100)}x`, /longer than 4096/],
  ])('rejects %j', (path, message) => {
    expect(() => splitCodebasePath(path)).toThrow(InvalidArgumentError);
    expect(() => splitCodebasePath(path)).toThrow(message);
  });

  it('rejects non-strings', () => {
    expect(() => splitCodebasePath(undefined)).toThrow(InvalidArgumentError);
    expect(() => splitCodebasePath(['a'])).toThrow(InvalidArgumentError);
  });

  it('accepts the root only where a listing asks for it', () => {
    expect(splitCodebasePath('', { allowRoot: true })).toEqual([]);
    expect(() => splitCodebasePath('/', { allowRoot: true })).toThrow(InvalidArgumentError);
  });
});
