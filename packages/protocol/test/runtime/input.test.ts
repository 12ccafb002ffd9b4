// Runtime input validation (runtime/input.ts): both runtimes accept exactly what these accept.
import { describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  validateCommand,
  validateCwd,
  validateEnv,
  validateHostPath,
  validateSandboxFiles,
  validateSandboxId,
  validateTimeoutMs,
} from '../../src/index.js';

describe('validateCwd', () => {
  it('accepts absolute, normalised paths', () => {
    expect(validateCwd('/')).toBe('/');
    expect(validateCwd('/workspace/src')).toBe('/workspace/src');
  });

  it.each(['', 'workspace', './x', '/a/../b', '/a/./b', '//a', '/a//b', '/a/', '/a\0b'])(
    'refuses %j',
    (cwd) => {
      expect(() => validateCwd(cwd)).toThrow(InvalidArgumentError);
    },
  );
});

describe('validateEnv', () => {
  it('accepts portable names with any string value, and returns the same object', () => {
    const env = { PATH: '/usr/bin', _x1: '', A: 'a=b c\n' };
    expect(validateEnv(env)).toBe(env);
  });

  it.each(['1A', 'A-B', 'A=B', '', 'Ä', 'A B', 'A\0'])('refuses the name %j', (name) => {
    expect(() => validateEnv({ [name]: 'v' })).toThrow(InvalidArgumentError);
  });

  it('refuses NUL bytes and non-strings in values', () => {
    expect(() => validateEnv({ A: 'a\0b' })).toThrow(/must be a string without NUL bytes/);
    expect(() => validateEnv({ A: 1 as unknown as string })).toThrow(InvalidArgumentError);
  });
});

describe('validateCommand', () => {
  it('accepts a non-empty string or argv', () => {
    expect(() => validateCommand('echo hi')).not.toThrow();
    expect(() => validateCommand(['echo', ''])).not.toThrow();
  });

  it('refuses empty commands, NUL bytes and non-strings', () => {
    expect(() => validateCommand('')).toThrow(/non-empty/);
    expect(() => validateCommand([])).toThrow(/non-empty/);
    expect(() => validateCommand(['', 'x'])).toThrow(/non-empty/);
    expect(() => validateCommand(['echo', 'a\0b'])).toThrow(/NUL/);
    expect(() => validateCommand('a\0b')).toThrow(/NUL/);
    expect(() => validateCommand(['echo', 2 as unknown as string])).toThrow(InvalidArgumentError);
  });
});

describe('validateSandboxId', () => {
  it('accepts one safe name component of up to 128 characters', () => {
    expect(validateSandboxId('sb_0123-abcd')).toBe('sb_0123-abcd');
    expect(validateSandboxId('a'.repeat(128))).toBe('a'.repeat(128));
  });

  it.each(['', '_sb', '-sb', 'sb/1', '../x', 'sb.1', 'sb 1', 'a'.repeat(129)])('refuses %j', (id) => {
    expect(() => validateSandboxId(id)).toThrow(InvalidArgumentError);
  });
});

describe('validateHostPath', () => {
  it('accepts absolute, normalised paths and drops a trailing slash', () => {
    expect(validateHostPath('/', 'p')).toBe('/');
    expect(validateHostPath('/srv/af', 'p')).toBe('/srv/af');
    expect(validateHostPath('/srv/af/', 'p')).toBe('/srv/af');
  });

  it.each(['', 'srv', '/srv/../etc', '/srv//af', '/srv/./af', '/srv\0'])('refuses %j, naming it', (path) => {
    expect(() => validateHostPath(path, 'stateDir')).toThrow(/^stateDir must be an absolute, normalised/);
  });
});

describe('validateTimeoutMs', () => {
  it('accepts no timeout or a positive integer', () => {
    expect(() => validateTimeoutMs(undefined)).not.toThrow();
    expect(() => validateTimeoutMs(1)).not.toThrow();
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53])('refuses %s', (timeoutMs) => {
    expect(() => validateTimeoutMs(timeoutMs)).toThrow(/timeoutMs must be a positive integer/);
  });
});

describe('validateSandboxFiles', () => {
  it('accepts absolute file paths outside the reserved ones', () => {
    const files = [{ dest: '/etc/ssl/certs/ca-certificates.crt', content: 'x' }];
    expect(validateSandboxFiles(files, ['/workspace'])).toBe(files);
  });

  it.each(['', 'etc/x', '/', '/a/../b', '//a', '/a/', '/a\0b'])('refuses the destination %j', (dest) => {
    expect(() => validateSandboxFiles([{ dest, content: '' }])).toThrow(/files\[0\]\.dest/);
  });

  it('refuses a destination given twice or inside a reserved mount point, naming it', () => {
    const file = { dest: '/etc/a', content: '' };
    expect(() => validateSandboxFiles([file, file])).toThrow('files[1].dest /etc/a is given twice');
    expect(() => validateSandboxFiles([{ dest: '/workspace/ca.pem', content: '' }], ['/workspace'])).toThrow(
      'files[0].dest /workspace/ca.pem is inside /workspace',
    );
  });
});
