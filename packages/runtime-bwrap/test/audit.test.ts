// bwrap's audit argv: `--setenv NAME VALUE` values redacted, host paths masked everywhere (the masking core
// itself is tested in packages/protocol/test/runtime/audit-mask.test.ts).
import { describe, expect, it } from 'vitest';
import { maskArgv } from '../src/exec/audit.js';
import { maskHostPaths } from '../src/index.js';

const placeholders = [
  { hostPath: '/srv/af/ws/sb_1', placeholder: '<workspace>' },
  { hostPath: '/srv/af/state/sb_1', placeholder: '<state>' },
  { hostPath: '/srv/af', placeholder: '<data>' },
];

describe('maskHostPaths (the package export)', () => {
  it("uses bwrap's path boundaries", () => {
    expect(maskHostPaths('a=/srv/af/ws/sb_1:/srv/af/ws/sb_1', placeholders)).toBe(
      'a=<workspace>:<workspace>',
    );
    expect(maskHostPaths('/srv/af,x', placeholders)).toBe('/srv/af,x');
  });
});

describe('maskArgv', () => {
  it('masks paths everywhere and redacts only the named env values', () => {
    const argv = [
      '--bind',
      '/srv/af/ws/sb_1',
      '/workspace',
      '--setenv',
      'TOKEN',
      'abc',
      '--setenv',
      'PATH',
      '/usr/bin',
      '--setenv',
      'DATA',
      '/srv/af/state/sb_1',
      '--',
      'cat',
      '/srv/af/x',
    ];
    expect(maskArgv({ argv, placeholders, redactEnv: new Set(['TOKEN']) })).toEqual([
      '--bind',
      '<workspace>',
      '/workspace',
      '--setenv',
      'TOKEN',
      '<redacted>',
      '--setenv',
      'PATH',
      '/usr/bin',
      '--setenv',
      'DATA',
      '<state>',
      '--',
      'cat',
      '<data>/x',
    ]);
  });

  it('does not treat a `--setenv` word inside the command as an option', () => {
    const argv = ['--', 'echo', '--setenv', 'TOKEN', 'x'];
    expect(maskArgv({ argv, placeholders, redactEnv: new Set(['TOKEN']) })).toEqual(argv);
  });

  it('leaves a trailing `--setenv` without its two words as it is', () => {
    const argv = ['--setenv', 'TOKEN'];
    expect(maskArgv({ argv, placeholders, redactEnv: new Set(['TOKEN']) })).toEqual(argv);
  });
});
