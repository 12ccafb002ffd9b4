// The built-in presets of contract §8. Priorities are spaced so users can slot rules between them:
// base access 0, write areas 10, secrets 100 (a secret inside a write area stays hidden).
import type { PermissionRule } from '@agentfense/protocol';

/** A named, documented rule set. */
export interface Preset {
  readonly name: string;
  readonly description: string;
  readonly rules: readonly PermissionRule[];
}

/** Priority of the rules that hide secrets in the built-in presets. */
export const SECRET_PRIORITY = 100;
/** Priority of the write areas of `agent-safe`. */
export const WRITE_AREA_PRIORITY = 10;

/**
 * Paths that hold secrets in typical repositories: hidden (`none`) by agent-safe and development.
 * contract §8's list, plus `/**` twins of the name globs: `**\/.env*` alone hides a file or directory named
 * `.env*` but would leave the contents of a `.env/` or `credentials/` directory readable.
 */
export const SECRET_PATTERNS: readonly string[] = [
  '**/.env*',
  '**/.env*/**',
  '**/secrets/**',
  '*.key',
  '*.pem',
  '**/credentials*',
  '**/credentials*/**',
  '**/.git/**',
];

const hideSecrets: readonly PermissionRule[] = SECRET_PATTERNS.map((pattern) => ({
  pattern,
  permission: 'none',
  priority: SECRET_PRIORITY,
}));

/** The presets every installation has, in the order `agentfense presets` lists them. */
export const BUILTIN_PRESETS: readonly Preset[] = [
  {
    name: 'agent-safe',
    description:
      'Read everything, write /output and /tmp, hide secrets (.env, secrets/, keys, credentials, .git). The default.',
    rules: [
      { pattern: '**/*', permission: 'read' },
      { pattern: '/output/**', permission: 'write', priority: WRITE_AREA_PRIORITY },
      { pattern: '/tmp/**', permission: 'write', priority: WRITE_AREA_PRIORITY },
      ...hideSecrets,
    ],
  },
  {
    name: 'read-only',
    description: 'Read every file; no writes anywhere.',
    rules: [{ pattern: '**/*', permission: 'read' }],
  },
  {
    name: 'full-access',
    description: 'Read and write every file (trusted automation).',
    rules: [{ pattern: '**/*', permission: 'write' }],
  },
  {
    name: 'development',
    description: 'Read and write everything except secrets, which stay hidden.',
    rules: [{ pattern: '**/*', permission: 'write' }, ...hideSecrets],
  },
  {
    name: 'view-only',
    description: 'See every name (ls, find, stat) but read no file content.',
    rules: [{ pattern: '**/*', permission: 'view' }],
  },
];

/** The preset used when a caller names none. */
export const DEFAULT_PRESET = 'agent-safe';
