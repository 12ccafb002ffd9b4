// Matching semantics of each pattern kind (contract §1 "Matching"), one rule at a time plus a default-deny floor.
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../src/index.js';
import type { PatternType } from '../../src/index.js';

/** True when the single rule matches the path (it grants read; nothing else is granted). */
function matches(pattern: string, path: string, type?: PatternType): boolean {
  const rule = type === undefined ? { pattern, permission: 'read' } : { pattern, permission: 'read', type };
  return compileRules([rule]).permissionOf(path) === 'read';
}

function expectMatches(pattern: string, yes: string[], no: string[], type?: PatternType): void {
  for (const path of yes) expect(matches(pattern, path, type), `${pattern} should match ${path}`).toBe(true);
  for (const path of no)
    expect(matches(pattern, path, type), `${pattern} should not match ${path}`).toBe(false);
}

describe('file rules', () => {
  it('match exactly that path', () => {
    expectMatches('/config.yaml', ['/config.yaml'], ['/config.yaml.bak', '/x/config.yaml', '/config', '/']);
  });
  it('do not match below the path', () => {
    expectMatches('/docs', ['/docs'], ['/docs/a.md']);
  });
  it('are taken relative to the root without a leading slash', () => {
    expectMatches('docs/a.md', ['/docs/a.md'], ['/x/docs/a.md']);
  });
  it('treat glob characters literally when the type says file', () => {
    expectMatches('/a*.txt', ['/a*.txt'], ['/ab.txt'], 'file');
  });
});

describe('directory rules', () => {
  it('match the directory itself and everything below it', () => {
    expectMatches(
      '/docs/',
      ['/docs', '/docs/a.md', '/docs/x/y/z'],
      ['/docsx', '/doc', '/x/docs', '/x/docs/a', '/'],
    );
  });
  it('are taken relative to the root without a leading slash', () => {
    expectMatches('docs/', ['/docs', '/docs/a'], ['/x/docs']);
  });
  it('`/` covers the whole codebase including the root', () => {
    expectMatches('/', ['/', '/a', '/a/b/c'], []);
  });
  it('may be given without a trailing slash when the type says directory', () => {
    expectMatches('/docs', ['/docs', '/docs/a'], ['/docsx'], 'directory');
  });
});

describe('anchored globs (leading /)', () => {
  it('match from the root only', () => {
    expectMatches(
      '/src/*.ts',
      ['/src/a.ts', '/src/.hidden.ts'],
      ['/x/src/a.ts', '/src/lib/a.ts', '/src/a.js'],
    );
    expectMatches('/src/**/*.ts', ['/src/a.ts', '/src/lib/deep/a.ts'], ['/lib/src/a.ts', '/src/a.tsx']);
  });
  it('match dotfiles (picomatch dot: true)', () => {
    expectMatches('/config/*', ['/config/.env', '/config/a'], ['/config/a/b']);
  });
  it('root-relative globs with a slash are anchored too (like .gitignore)', () => {
    expectMatches('src/*.ts', ['/src/a.ts'], ['/x/src/a.ts']);
  });
  it('never match the root itself', () => {
    expectMatches('/**', ['/a', '/a/b'], ['/']);
  });
});

describe('globs ending in /**', () => {
  it('picomatch alone is inconsistent about the directory itself, which is why the engine tests it', () => {
    expect(picomatch('a/**', { dot: true })('a')).toBe(true);
    expect(picomatch('src/*/**', { dot: true })('src/lib')).toBe(false);
  });
  it('match the directory itself even where picomatch would not', () => {
    expectMatches('/src/*/**', ['/src/lib', '/src/lib/a'], ['/src']);
    expectMatches('**/build*/**', ['/build', '/x/build2', '/x/build2/a'], ['/x']);
  });
  it('match the directory itself, so hiding a tree hides its name', () => {
    expectMatches('/secrets/**', ['/secrets', '/secrets/a', '/secrets/a/b'], ['/secretsx', '/x/secrets']);
    expectMatches(
      '**/secrets/**',
      ['/secrets', '/x/secrets', '/x/y/secrets/a'],
      ['/secretsx', '/x/mysecrets/a'],
    );
  });
  it('a glob ending in / covers the directories it matches and their contents', () => {
    expectMatches('/src/*/', ['/src/lib', '/src/lib/a.ts'], ['/src', '/x/src/lib']);
  });
});

describe('globs with a leading **/', () => {
  it('match at any depth including the root', () => {
    expectMatches(
      '**/secrets/**',
      ['/secrets/a', '/x/secrets/a', '/x/y/secrets/a/b'],
      ['/secrets.txt', '/x/secret/a'],
    );
    expectMatches('**/.env*', ['/.env', '/.env.local', '/a/b/.env.production'], ['/env', '/a/x.env']);
    expectMatches(
      '**/node_modules/*/package.json',
      ['/node_modules/x/package.json', '/a/node_modules/x/package.json'],
      ['/node_modules/package.json'],
    );
  });
});

describe('basename globs (no slash at all)', () => {
  it('match the last component at any depth', () => {
    expectMatches('*.key', ['/a.key', '/x/y/private.key', '/.key'], ['/a.key/b', '/a.keys', '/']);
    expectMatches('.env*', ['/.env', '/a/.env.local'], ['/a/x.env', '/.env/x']);
    expectMatches('credentials*', ['/credentials', '/a/credentials.json'], ['/a/my-credentials']);
  });
  it('`*.env*` matches env files at any depth', () => {
    expectMatches(
      '*.env*',
      ['/.env', '/.env.local', '/app/.env.production', '/a/b/c/prod.env', '/x.envrc'],
      ['/env', '/a/environment'],
    );
  });
  it('a literal name typed as glob matches that name at any depth', () => {
    expectMatches('README.md', ['/README.md', '/a/b/README.md'], ['/README.mdx'], 'glob');
  });
  it('braces, classes and negation follow picomatch', () => {
    expectMatches('*.{pem,key}', ['/a.pem', '/b/c.key'], ['/a.crt']);
    expectMatches('id_rsa[0-9]', ['/id_rsa1', '/a/id_rsa9'], ['/id_rsa', '/id_rsa10']);
    expectMatches('!*.key', ['/a.txt', '/d/b.md'], ['/a.key', '/d/b.key']);
  });
});
