// Directories and exceptions (contract §1): traversability and visibility of directories whose own permission is none.
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../src/index.js';

const SEED_001 = [
  { pattern: '**/*', permission: 'read' },
  { pattern: '/secrets/**', permission: 'none' },
  { pattern: '/secrets/public.key', permission: 'read' },
];
const SEED_002 = [
  { pattern: '**/*', permission: 'read', priority: 0 },
  { pattern: '/output/**', permission: 'write', priority: 10 },
  { pattern: '**/.env*', permission: 'none', priority: 100 },
  { pattern: '/secrets/**', permission: 'none', priority: 100 },
  { pattern: '**/*.key', permission: 'none', priority: 100 },
  { pattern: '/secrets/public.key', permission: 'read', priority: 200 },
];

describe('traversability', () => {
  it.each([
    ['seed 001 (no priorities)', SEED_001],
    ['seed 002 (explicit priorities)', SEED_002],
  ])('%s: /secrets is traversable for its public.key exception, and lists only it', (_name, rules) => {
    const rs = compileRules(rules);
    expect(rs.permissionOf('/secrets')).toBe('none');
    expect(rs.isTraversable('/secrets')).toBe(true);
    expect(rs.visibility('/secrets', { isDirectory: true })).toBe('visible');
    expect(rs.visibility('/secrets/public.key', { isDirectory: false })).toBe('visible');
    expect(rs.visibility('/secrets/private.key', { isDirectory: false })).toBe('hidden');
    expect(rs.visibility('/secrets/sub', { isDirectory: true })).toBe('hidden');
    expect(rs.isTraversable('/secrets/sub')).toBe(false);
  });

  it('a directory whose own permission is view or more is traversable', () => {
    const rs = compileRules([{ pattern: '/docs/', permission: 'view' }]);
    expect(rs.isTraversable('/docs')).toBe(true);
    expect(rs.isTraversable('/docs/x')).toBe(true);
    expect(rs.isTraversable('/src')).toBe(false);
  });

  it('ancestors of an exception are traversable all the way up, siblings are not', () => {
    const rs = compileRules([{ pattern: '/a/b/c/d.txt', permission: 'view' }]);
    for (const dir of ['/', '/a', '/a/b', '/a/b/c']) expect(rs.isTraversable(dir), dir).toBe(true);
    for (const dir of ['/b', '/a/c', '/a/b/c/d.txt/e', '/a/bb'])
      expect(rs.isTraversable(dir), dir).toBe(false);
  });

  it('an exception that is itself overridden does not make its parent traversable', () => {
    const rs = compileRules([
      { pattern: '/secrets/**', permission: 'none', priority: 10 },
      { pattern: '/secrets/public.key', permission: 'read' }, // loses to the priority-10 glob
    ]);
    expect(rs.permissionOf('/secrets/public.key')).toBe('none');
    expect(rs.isTraversable('/secrets')).toBe(false);
  });

  it('a directory exception counts even when a file rule hides its own entry', () => {
    const rs = compileRules([
      { pattern: '/secrets/**', permission: 'none' },
      { pattern: '/secrets/pub/', permission: 'read' },
      { pattern: '/secrets/pub', permission: 'none', type: 'file' },
    ]);
    expect(rs.permissionOf('/secrets/pub')).toBe('none');
    expect(rs.permissionOf('/secrets/pub/a')).toBe('read');
    expect(rs.isTraversable('/secrets/pub')).toBe(true);
    expect(rs.isTraversable('/secrets')).toBe(true);
  });

  it('a glob exception with a higher priority makes the tree traversable; with a lower one it does not', () => {
    const high = compileRules([
      { pattern: '/secrets/**', permission: 'none', priority: 10 },
      { pattern: '/secrets/*.pub', permission: 'read', priority: 20 },
    ]);
    expect(high.permissionOf('/secrets/id.pub')).toBe('read');
    expect(high.isTraversable('/secrets')).toBe(true);
    expect(high.isTraversable('/secrets/deeper')).toBe(false);

    const low = compileRules([
      { pattern: '/secrets/**', permission: 'none', priority: 10 },
      { pattern: '/secrets/*.pub', permission: 'read', priority: 5 },
    ]);
    expect(low.permissionOf('/secrets/id.pub')).toBe('none');
    expect(low.isTraversable('/secrets')).toBe(false);
  });

  it('a catch-all below a tree-hiding glob does not make the hidden tree traversable', () => {
    const rs = compileRules([
      { pattern: '**/*', permission: 'read' },
      { pattern: '/secrets/**', permission: 'none' },
    ]);
    expect(rs.isTraversable('/secrets')).toBe(false);
    expect(rs.isTraversable('/secrets/a')).toBe(false);
    expect(rs.visibility('/secrets', { isDirectory: true })).toBe('hidden');
    expect(rs.isTraversable('/')).toBe(true);
    expect(rs.isTraversable('/src')).toBe(true);
  });

  it('a catch-all outranked by a non-covering rule still makes the directory traversable', () => {
    // The file rule hides /secrets itself but matches nothing inside it, so **/* still decides /secrets/a.
    const rs = compileRules([
      { pattern: '**/*', permission: 'read' },
      { pattern: '/secrets', permission: 'none', type: 'file' },
    ]);
    expect(rs.permissionOf('/secrets')).toBe('none');
    expect(rs.permissionOf('/secrets/a')).toBe('read');
    expect(rs.isTraversable('/secrets')).toBe(true);
  });

  it('/src/**/*.ts read only: /src and its subdirectories are traversable, unrelated ones are not', () => {
    const rs = compileRules([{ pattern: '/src/**/*.ts', permission: 'read' }]);
    expect(rs.permissionOf('/src')).toBe('none');
    for (const dir of ['/', '/src', '/src/lib', '/src/lib/deep'])
      expect(rs.isTraversable(dir), dir).toBe(true);
    for (const dir of ['/docs', '/lib/src']) expect(rs.isTraversable(dir), dir).toBe(false);
    expect(rs.visibility('/src/a.ts', { isDirectory: false })).toBe('visible');
    expect(rs.visibility('/src/a.js', { isDirectory: false })).toBe('hidden');
  });

  it('globs without ** are checked segment by segment', () => {
    const rs = compileRules([{ pattern: '/a/*/c/*.txt', permission: 'view' }]);
    for (const dir of ['/', '/a', '/a/x', '/a/x/c']) expect(rs.isTraversable(dir), dir).toBe(true);
    for (const dir of ['/b', '/a/x/d', '/a/x/c/e', '/a/x/c/e/f'])
      expect(rs.isTraversable(dir), dir).toBe(false);
  });

  it('basename globs and **/x/** globs can match inside any directory not shadowed by a covering rule', () => {
    const rs = compileRules([
      { pattern: '*.md', permission: 'read' },
      { pattern: '**/public/**', permission: 'view' },
      { pattern: '/vault/', permission: 'none', priority: 5 },
    ]);
    expect(rs.isTraversable('/any/dir')).toBe(true);
    expect(rs.isTraversable('/vault')).toBe(false);
    expect(rs.isTraversable('/vault/public')).toBe(false);
    expect(rs.permissionOf('/vault/public/a')).toBe('none');
  });

  it('nothing granted means nothing is traversable, including the root', () => {
    const rs = compileRules([{ pattern: '**/*', permission: 'none' }]);
    expect(rs.isTraversable('/')).toBe(false);
    expect(rs.isTraversable('/a')).toBe(false);
    expect(compileRules([]).isTraversable('/')).toBe(false);
  });

  it('a view directory rule covering the directory makes it traversable even when a file rule hides its entry', () => {
    const rs = compileRules([
      { pattern: '/x/', permission: 'read' },
      { pattern: '/x', permission: 'none', type: 'file', priority: 1 },
    ]);
    expect(rs.permissionOf('/x')).toBe('none');
    expect(rs.permissionOf('/x/a')).toBe('read');
    expect(rs.isTraversable('/x')).toBe(true);
  });

  it('a file is never visible through traversability', () => {
    const rs = compileRules(SEED_001);
    expect(rs.visibility('/secrets', { isDirectory: false })).toBe('hidden');
  });
});

describe('uniform subtrees', () => {
  it('full access is write below every directory; a hidden glob or a narrower rule inside breaks it', () => {
    expect(compileRules([{ pattern: '**', permission: 'write' }]).uniformBelow('/src')).toBe('write');
    const rs = compileRules(SEED_002);
    expect(rs.uniformBelow('/output/build')).toBe(null); // **/.env* and **/*.key may match below
    expect(rs.uniformBelow('/secrets')).toBe(null); // public.key is read
    const plain = compileRules([
      { pattern: '**/*', permission: 'read' },
      { pattern: '/output/**', permission: 'write', priority: 10 },
      { pattern: '/output/keep.txt', permission: 'read', priority: 20 },
    ]);
    expect(plain.uniformBelow('/output/a')).toBe('write');
    expect(plain.uniformBelow('/output')).toBe(null);
    expect(plain.uniformBelow('/docs')).toBe('read');
    expect(compileRules([{ pattern: '/src/', permission: 'read' }]).uniformBelow('/docs')).toBe('none');
  });
});
