// extendPreset (contract §8): a preset plus additions, with overrides lifted above every base rule.
import { validateRules } from '@agentfense/protocol/core';
import type { PermissionRule } from '@agentfense/protocol';
import { defaultPresets } from './registry.js';
import type { PresetRegistry } from './registry.js';

export interface ExtendPresetOptions {
  /** Rules appended after the base (they compete with it under the normal resolution order). */
  readonly additions?: readonly PermissionRule[];
  /**
   * Rules that must win over the base wherever they match: each one's priority is raised above the
   * highest priority of the base and the additions, keeping the overrides' own relative priorities.
   */
  readonly overrides?: readonly PermissionRule[];
  /** Registry to read `base` from when it is a name (the default registry otherwise). */
  readonly registry?: PresetRegistry;
}

/** The rules of `base` (a preset name or a rule list) extended with additions and overrides. */
export function extendPreset(
  base: string | readonly PermissionRule[],
  options: ExtendPresetOptions = {},
): PermissionRule[] {
  const registry = options.registry ?? defaultPresets;
  const baseRules = typeof base === 'string' ? registry.get(base).rules : validateRules(base);
  const additions = validateRules(options.additions ?? []);
  const overrides = validateRules(options.overrides ?? []);
  const below = [...baseRules, ...additions];
  const ceiling = below.reduce((max, rule) => Math.max(max, rule.priority ?? 0), 0);
  const lowestOverride = overrides.reduce((min, rule) => Math.min(min, rule.priority ?? 0), Infinity);
  const lift = overrides.length === 0 ? 0 : ceiling + 1 - lowestOverride;
  return [...below, ...overrides.map((rule) => ({ ...rule, priority: (rule.priority ?? 0) + lift }))];
}
