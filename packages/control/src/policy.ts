// Turning the user's policy choice (a preset name or explicit rules) into one validated rule list.
import { InvalidArgumentError, validateRules } from '@agentfense/protocol/core';
import type { PermissionRule } from '@agentfense/protocol';
import { DEFAULT_PRESET } from './presets/builtin.js';
import { defaultPresets } from './presets/registry.js';
import type { PresetRegistry } from './presets/registry.js';

export interface PolicyChoice {
  /** A preset name; the default (`agent-safe`) when neither this nor `rules` is given. */
  readonly preset?: string | undefined;
  /** Explicit rules; exclusive with `preset`. */
  readonly rules?: readonly unknown[] | undefined;
  readonly registry?: PresetRegistry;
}

/** The rules a sandbox runs with. Giving both a preset and rules is an error, not a silent choice. */
export function resolvePolicy(choice: PolicyChoice): PermissionRule[] {
  if (choice.preset !== undefined && choice.rules !== undefined) {
    throw new InvalidArgumentError('give either a preset or explicit rules, not both');
  }
  if (choice.rules !== undefined) return validateRules(choice.rules);
  const registry = choice.registry ?? defaultPresets;
  return [...registry.get(choice.preset ?? DEFAULT_PRESET).rules];
}
