import { describe, expect, it } from 'vitest';
import { compileRules } from '@agentfense/protocol';
import type { Permission, PermissionRule } from '@agentfense/protocol';
import { BUILTIN_PRESETS, PresetRegistry, extendPreset } from '../src/index.js';

const registry = new PresetRegistry();
const permissionOf = (rules: readonly PermissionRule[], path: string): Permission =>
  compileRules(rules).permissionOf(path);
const preset = (name: string): readonly PermissionRule[] => registry.get(name).rules;

describe('built-in presets (contract §8)', () => {
  it('has exactly the five documented presets, agent-safe first', () => {
    expect(BUILTIN_PRESETS.map((p) => p.name)).toEqual([
      'agent-safe',
      'read-only',
      'full-access',
      'development',
      'view-only',
    ]);
  });

  it.each([
    ['/README.md', 'read'],
    ['/src/deep/app.py', 'read'],
    ['/output/report.txt', 'write'],
    ['/output', 'write'],
    ['/tmp/scratch/x', 'write'],
    ['/.env', 'none'],
    ['/svc/.env.production', 'none'],
    ['/secrets/db.txt', 'none'],
    ['/secrets', 'none'],
    ['/a/b/secrets/c', 'none'],
    ['/keys/server.key', 'none'],
    ['/deploy.pem', 'none'],
    ['/config/credentials.json', 'none'],
    ['/.git/config', 'none'],
    ['/vendor/lib/.git/HEAD', 'none'],
    ['/output/.env', 'none'],
    ['/output/id.pem', 'none'],
    ['/tmp/secrets/x', 'none'],
    ['/svc/.env/production.json', 'none'],
    ['/credentials/aws.json', 'none'],
  ] as const)('agent-safe: %s is %s', (path, expected) => {
    expect(permissionOf(preset('agent-safe'), path)).toBe(expected);
  });

  it('read-only reads everything and writes nothing', () => {
    expect(permissionOf(preset('read-only'), '/.env')).toBe('read');
    expect(permissionOf(preset('read-only'), '/output/x')).toBe('read');
  });

  it('full-access writes everything, secrets included', () => {
    expect(permissionOf(preset('full-access'), '/src/a.ts')).toBe('write');
    expect(permissionOf(preset('full-access'), '/.env')).toBe('write');
  });

  it('development writes everything except secrets, which stay hidden', () => {
    expect(permissionOf(preset('development'), '/src/a.ts')).toBe('write');
    expect(permissionOf(preset('development'), '/.env.local')).toBe('none');
    expect(permissionOf(preset('development'), '/secrets/x')).toBe('none');
    expect(permissionOf(preset('development'), '/x/.git/index')).toBe('none');
  });

  it('view-only shows names but no content', () => {
    expect(permissionOf(preset('view-only'), '/src/a.ts')).toBe('view');
    expect(permissionOf(preset('view-only'), '/.env')).toBe('view');
  });
});

describe('extendPreset', () => {
  it('appends additions and lifts overrides above every base rule (the seed example)', () => {
    const rules = extendPreset('agent-safe', {
      registry,
      additions: [{ pattern: '/logs/**', permission: 'write' }],
      overrides: [{ pattern: '**/.git/**', permission: 'read' }],
    });
    expect(permissionOf(rules, '/logs/app.log')).toBe('write');
    expect(permissionOf(rules, '/.git/HEAD')).toBe('read');
    // Additions do not beat the base's higher-priority secret rules.
    expect(permissionOf(rules, '/logs/.env')).toBe('none');
    // The base is unchanged.
    expect(permissionOf(preset('agent-safe'), '/.git/HEAD')).toBe('none');
  });

  it('keeps the relative order of overrides with their own priorities', () => {
    const rules = extendPreset('agent-safe', {
      registry,
      overrides: [
        { pattern: '/secrets/**', permission: 'read', priority: 5 },
        { pattern: '/secrets/private/**', permission: 'none', priority: 7 },
      ],
    });
    expect(permissionOf(rules, '/secrets/a')).toBe('read');
    expect(permissionOf(rules, '/secrets/private/b')).toBe('none');
  });

  it('accepts a rule list as base and rejects invalid additions naming the rule', () => {
    expect(() =>
      extendPreset([{ pattern: '**/*', permission: 'read' }], {
        additions: [{ pattern: '/x', permission: 'rw' as Permission }],
      }),
    ).toThrow(/rule 0.*permission/i);
  });

  it('names the known presets when the base is unknown', () => {
    expect(() => extendPreset('agent-unsafe', { registry })).toThrow(
      /unknown preset "agent-unsafe".*agent-safe/,
    );
  });
});

describe('registerPreset', () => {
  it('adds a preset usable by name', () => {
    const own = new PresetRegistry();
    own.register('ci-pipeline', [
      { pattern: '**/*', permission: 'read' },
      { pattern: '/build/**', permission: 'write' },
    ]);
    expect(permissionOf(own.get('ci-pipeline').rules, '/build/out.js')).toBe('write');
    expect(own.list().map((p) => p.name)).toContain('ci-pipeline');
    // Registries are independent.
    expect(registry.has('ci-pipeline')).toBe(false);
  });

  it('refuses to replace a built-in or an already registered name', () => {
    const own = new PresetRegistry();
    expect(() => own.register('agent-safe', [])).toThrow(/already exists/);
    own.register('mine', []);
    expect(() => own.register('mine', [])).toThrow(expect.objectContaining({ code: 'AF_ALREADY_EXISTS' }));
  });

  it('refuses invalid names and invalid rules', () => {
    const own = new PresetRegistry();
    expect(() => own.register('Bad Name', [])).toThrow(/invalid preset name/);
    expect(() => own.register('ok', [{ pattern: '', permission: 'read' }])).toThrow(/rule 0/);
    expect(own.has('ok')).toBe(false);
  });
});
