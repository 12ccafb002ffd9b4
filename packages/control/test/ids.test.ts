import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '@agentfense/protocol';
import { DataLayout, isId, newId, validateId } from '../src/index.js';

describe('ids', () => {
  it('makes ids of each kind that validate', () => {
    expect(newId('codebase')).toMatch(/^cb_[0-9a-f-]{36}$/);
    expect(newId('sandbox')).toMatch(/^sb_[0-9a-f-]{36}$/);
    expect(newId('session')).toMatch(/^ses_[0-9a-f-]{36}$/);
    for (const kind of ['codebase', 'sandbox', 'session'] as const) {
      const id = newId(kind);
      expect(validateId(kind, id)).toBe(id);
      expect(isId(kind, id)).toBe(true);
    }
  });

  it.each([
    ['sandbox', 'cb_0b3f4f5e-8d5c-4f7e-9a51-0e0d4d3b2a10'],
    ['sandbox', 'sb_0B3F4F5E-8D5C-4F7E-9A51-0E0D4D3B2A10'],
    ['sandbox', 'sb_../../etc'],
    ['sandbox', 'sb_0b3f4f5e-8d5c-4f7e-9a51-0e0d4d3b2a10/..'],
    ['sandbox', ' sb_0b3f4f5e-8d5c-4f7e-9a51-0e0d4d3b2a10'],
    ['sandbox', 'sb_0b3f4f5e-8d5c-4f7e-9a51-0e0d4d3b2a10\n'],
    ['codebase', ''],
    ['codebase', 42],
    ['session', null],
  ] as const)('rejects %s id %j', (kind, value) => {
    expect(() => validateId(kind, value)).toThrow(InvalidArgumentError);
    expect(isId(kind, value)).toBe(false);
  });

  it('names the kind and the value in the error', () => {
    expect(() => validateId('sandbox', 'sb_nope')).toThrow(
      /invalid sandbox id "sb_nope": expected sb_<uuid>/,
    );
  });

  it('builds data paths only from valid ids', () => {
    const layout = new DataLayout('/data');
    const id = newId('sandbox');
    expect(layout.sandbox(id)).toMatchObject({
      dir: `/data/sandboxes/${id}`,
      delta: `/data/sandboxes/${id}/delta`,
      mnt: `/data/sandboxes/${id}/mnt`,
      workspace: `/data/sandboxes/${id}/mnt/workspace`,
      state: `/data/sandboxes/${id}/state`,
    });
    expect(() => layout.sandbox('../../etc')).toThrow(InvalidArgumentError);
    expect(() => layout.codebaseFiles('cb_x/../../')).toThrow(InvalidArgumentError);
  });
});
