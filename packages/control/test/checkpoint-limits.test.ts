// The checkpoint limits: options over environment over defaults, each an integer from 1 to 4096, and a
// wrong value names the setting to fix.
import { describe, expect, it } from 'vitest';
import { checkpointLimits, DEFAULT_CHECKPOINT_LIMITS } from '../src/sandboxes/checkpoint-limits.js';

describe('checkpoint limits', () => {
  it('defaults to 256 checkpoints and a stack 32 deep', () => {
    expect(checkpointLimits({}, {})).toEqual({ maxCheckpoints: 256, maxStackDepth: 32 });
    expect(DEFAULT_CHECKPOINT_LIMITS).toEqual({ maxCheckpoints: 256, maxStackDepth: 32 });
  });

  it('takes the environment, and options over it', () => {
    const env = { AGENTFENSE_MAX_CHECKPOINTS: '10', AGENTFENSE_MAX_STACK_DEPTH: '4096' };
    expect(checkpointLimits({}, env)).toEqual({ maxCheckpoints: 10, maxStackDepth: 4096 });
    expect(checkpointLimits({ maxCheckpoints: 1 }, env)).toEqual({ maxCheckpoints: 1, maxStackDepth: 4096 });
    expect(checkpointLimits({}, { AGENTFENSE_MAX_CHECKPOINTS: '' })).toEqual(DEFAULT_CHECKPOINT_LIMITS);
  });

  it.each([0, 4097, 2.5, -1, Number.NaN])('refuses option maxCheckpoints %s, naming it', (value) => {
    expect(() => checkpointLimits({ maxCheckpoints: value }, {})).toThrow(
      /checkpoints\.maxCheckpoints must be an integer from 1 to 4096/,
    );
  });

  it('refuses a non-number option, naming it', () => {
    expect(() => checkpointLimits({ maxStackDepth: '8' as unknown as number }, {})).toThrow(
      /checkpoints\.maxStackDepth must be an integer from 1 to 4096 \(got 8\)/,
    );
  });

  it.each(['0', '5000', '1e3', ' 8', 'eight', '-3', '2.0'])(
    'refuses AGENTFENSE_MAX_STACK_DEPTH=%s, naming it',
    (raw) => {
      expect(() => checkpointLimits({}, { AGENTFENSE_MAX_STACK_DEPTH: raw })).toThrow(
        /AGENTFENSE_MAX_STACK_DEPTH must be an integer from 1 to 4096/,
      );
    },
  );
});
