// Named rule sets: the built-ins plus whatever a program registers. Instances, so tests and embedders can
// keep their own; the library's top-level `registerPreset`/`getPreset` use one default registry (contract §7
// exposes them as plain functions, which implies process-wide state — this is the only such state).
import {
  AlreadyExistsError,
  InvalidArgumentError,
  NotFoundError,
  validateRules,
} from '@agentfense/protocol/core';
import type { PermissionRule } from '@agentfense/protocol';
import { BUILTIN_PRESETS } from './builtin.js';
import type { Preset } from './builtin.js';

const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/** Holds presets by name; built-ins are always present and can never be replaced. */
export class PresetRegistry {
  readonly #presets = new Map<string, Preset>();

  constructor() {
    for (const preset of BUILTIN_PRESETS) this.#presets.set(preset.name, preset);
  }

  /** Adds a preset. Refuses an existing name (built-in or registered) and invalid rules. */
  register(name: string, rules: readonly unknown[], description = 'user-registered preset'): Preset {
    if (typeof name !== 'string' || !NAME_RE.test(name)) {
      throw new InvalidArgumentError(
        `invalid preset name ${JSON.stringify(name)}: use 1-64 lowercase letters, digits, '.', '_' or '-'`,
      );
    }
    if (this.#presets.has(name)) {
      throw new AlreadyExistsError(`preset "${name}" already exists; choose another name`);
    }
    const preset: Preset = { name, description, rules: validateRules(rules) };
    this.#presets.set(name, preset);
    return preset;
  }

  /** The preset called `name`; NotFoundError listing the known names otherwise. */
  get(name: string): Preset {
    const preset = this.#presets.get(name);
    if (preset === undefined) {
      throw new NotFoundError(
        `unknown preset "${name}"; known presets: ${[...this.#presets.keys()].join(', ')}`,
      );
    }
    return preset;
  }

  has(name: string): boolean {
    return this.#presets.has(name);
  }

  /** Every preset, built-ins first, in registration order. */
  list(): readonly Preset[] {
    return [...this.#presets.values()];
  }
}

/** The registry behind the library's top-level preset functions. */
export const defaultPresets = new PresetRegistry();

/** Registers a preset in the default registry (contract §8): refuses to replace an existing name. */
export function registerPreset(name: string, rules: readonly PermissionRule[]): Preset {
  return defaultPresets.register(name, rules);
}

/** The rules of a preset in the default registry. */
export function getPreset(name: string): Preset {
  return defaultPresets.get(name);
}

/** Every preset of the default registry. */
export function listPresets(): readonly Preset[] {
  return defaultPresets.list();
}
