// Public API of @agentfense/control: presets and policy today; sandboxes, sessions and the client as they land.

// --- Presets (SPEC §8) ---
export { BUILTIN_PRESETS, DEFAULT_PRESET, SECRET_PATTERNS } from './presets/builtin.js';
export type { Preset } from './presets/builtin.js';
export {
  PresetRegistry,
  defaultPresets,
  registerPreset,
  getPreset,
  listPresets,
} from './presets/registry.js';
export { extendPreset } from './presets/extend.js';
export type { ExtendPresetOptions } from './presets/extend.js';

// --- Policy ---
export { resolvePolicy } from './policy.js';
export type { PolicyChoice } from './policy.js';
export { loadRulesFile } from './rules-file.js';

// --- Permission engine (re-exported for library users: explain a path under a rule set) ---
export { explain, compileRules } from '@agentfense/protocol';

// --- CLI ---
export { runCli, createProgram } from './cli/main.js';
