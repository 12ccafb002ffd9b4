// Audit argv masking: host paths become placeholders at path boundaries; caller env values are redacted.
import { describe, expect, it } from 'vitest';
import { maskArgv, maskHostPaths } from '../src/audit.js';

const placeholders = [
  { hostPath: '/srv/af/ws/sb_1', placeholder: '<workspace>' },
  { hostPath: '/srv/af/state/sb_1', placeholder: '<state>' },
  { hostPath: '/srv/af', placeholder: '<data>' },
];

describe('maskHostPaths', () => {
  it('replaces the longest matching host path first, only at path boundaries', () => {
    expect(maskHostPaths('/srv/af/ws/sb_1', placeholders)).toBe('<workspace>');
    expect(maskHostPaths('/srv/af/state/sb_1/bwrap/etc', placeholders)).toBe('<state>/bwrap/etc');
    expect(maskHostPaths('/srv/af/other', placeholders)).toBe('<data>/other');
    expect(maskHostPaths('/srv/afx', placeholders)).toBe('/srv/afx');
    expect(maskHostPaths('a=/srv/af/ws/sb_1:/srv/af/ws/sb_1', placeholders)).toBe(
      'a=<workspace>:<workspace>',
    );
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
      '--',
      'cat',
      '<data>/x',
    ]);
  });

  it('does not treat a `--setenv` word inside the command as an option', () => {
    const argv = ['--', 'echo', '--setenv', 'TOKEN', 'x'];
    expect(maskArgv({ argv, placeholders, redactEnv: new Set(['TOKEN']) })).toEqual(argv);
  });
});
