// The audit-masking core (runtime/audit-mask.ts): host paths become placeholders at path boundaries only,
// longest first; caller env values are redacted. Each runtime's argv walk is tested in its own package.
import { describe, expect, it } from 'vitest';
import { HOST_PATH_BOUNDARY, REDACTED, maskEnvValue, maskHostPaths } from '../../src/index.js';

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
    expect(maskHostPaths('x /srv/af y', placeholders)).toBe('x <data> y');
  });

  it('keeps masking after a non-boundary match, and never masks `/`', () => {
    expect(maskHostPaths('/srv/afx:/srv/af', placeholders)).toBe('/srv/afx:<data>');
    expect(maskHostPaths('/usr', [{ hostPath: '/', placeholder: '<root>' }])).toBe('/usr');
  });

  it('takes the boundary set: by default `,` and `"` are not boundaries', () => {
    expect(HOST_PATH_BOUNDARY.has(',')).toBe(false);
    expect(maskHostPaths('source=/srv/af,target=/x', placeholders)).toBe('source=/srv/af,target=/x');
    const csv = new Set([...HOST_PATH_BOUNDARY, ',', '"']);
    expect(maskHostPaths('source=/srv/af,target=/x', placeholders, csv)).toBe('source=<data>,target=/x');
    expect(maskHostPaths('"/srv/af"', placeholders, csv)).toBe('"<data>"');
  });
});

describe('maskEnvValue', () => {
  it('redacts the named variables and masks host paths in the others', () => {
    const options = { placeholders, redactEnv: new Set(['TOKEN']) };
    expect(maskEnvValue('TOKEN', '/srv/af', options)).toBe(REDACTED);
    expect(maskEnvValue('PLAIN', '/srv/af/ws/sb_1/x', options)).toBe('<workspace>/x');
    expect(maskEnvValue('PLAIN', 'v', { placeholders })).toBe('v');
  });

  it('passes the boundary set on', () => {
    const csv = new Set([...HOST_PATH_BOUNDARY, ',']);
    expect(maskEnvValue('P', '/srv/af,x', { placeholders })).toBe('/srv/af,x');
    expect(maskEnvValue('P', '/srv/af,x', { placeholders }, csv)).toBe('<data>,x');
  });
});
