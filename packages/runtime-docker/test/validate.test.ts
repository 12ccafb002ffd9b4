// Docker's own input checks on top of the shared ones (packages/protocol/test/runtime/input.test.ts).
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '@agentfense/protocol';
import { validateHostPath } from '../src/validate.js';

describe('validateHostPath (docker)', () => {
  it('applies the shared rules first, and returns the path without a trailing slash', () => {
    expect(validateHostPath('/srv/af/', 'stateDir')).toBe('/srv/af');
    expect(() => validateHostPath('srv/af', 'stateDir')).toThrow(/^stateDir must be an absolute, normalised/);
    expect(() => validateHostPath('/srv/../x\n', 'stateDir')).toThrow(/absolute, normalised/);
  });

  it('refuses line breaks, which a --mount CSV field cannot carry', () => {
    for (const path of ['/srv/a\nb', '/srv/a\rb', '/srv/a\n/']) {
      expect(() => validateHostPath(path, 'workspaceHostPath')).toThrow(InvalidArgumentError);
      expect(() => validateHostPath(path, 'workspaceHostPath')).toThrow(/must not contain line breaks/);
    }
  });
});
