// Audit argv masking for docker: host paths inside --mount, caller env values, the wrapper script.
import { describe, expect, it } from 'vitest';
import { buildExecArgs } from '../src/exec/args.js';
import { maskArgv, maskHostPaths } from '../src/exec/audit.js';

const placeholders = [
  { hostPath: '/srv/af/mnt/sb_1', placeholder: '<workspace>' },
  { hostPath: '/srv/af/state/sb_1', placeholder: '<state>' },
  { hostPath: '/srv/af', placeholder: '<data>' },
];

describe('maskHostPaths', () => {
  it('replaces host paths at path boundaries, including CSV and quotes', () => {
    expect(maskHostPaths('type=bind,source=/srv/af/mnt/sb_1,target=/workspace', placeholders)).toBe(
      'type=bind,source=<workspace>,target=/workspace',
    );
    expect(maskHostPaths('source="/srv/af/mnt/sb_1"', placeholders)).toBe('source="<workspace>"');
    expect(maskHostPaths('/srv/af/other', placeholders)).toBe('<data>/other');
    expect(maskHostPaths('/srv/afx', placeholders)).toBe('/srv/afx');
  });
});

describe('maskArgv', () => {
  it('redacts only the named env values and shortens the wrapper', () => {
    const argv = buildExecArgs({
      container: 'c1',
      command: ['cat', '/srv/af/state/sb_1/x'],
      interactive: false,
      env: { TOKEN: 'hunter2', PLAIN: '/srv/af/mnt/sb_1' },
    });
    const masked = maskArgv({ argv, placeholders, redactEnv: new Set(['TOKEN']) });
    expect(masked).toContain('TOKEN=<redacted>');
    expect(masked).toContain('PLAIN=<workspace>');
    expect(masked).toContain('<agentfense-session-wrapper>');
    expect(masked.slice(-2)).toEqual(['cat', '<state>/x']);
    expect(masked.join(' ')).not.toContain('hunter2');
  });
});
