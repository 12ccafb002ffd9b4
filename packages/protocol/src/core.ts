// `@agentfense/protocol/core`: the error kinds, the permission engine and the pure input checks, without
// the worker wire protocol (msgpack). Short-lived processes that never talk to a worker (`agentfense
// --help`, `explain`, `presets`) load only this; everything here is the same module as in the main entry,
// so `instanceof` holds across both.
export {
  ERROR_CODES,
  AgentFenseError,
  InvalidArgumentError,
  NotFoundError,
  AlreadyExistsError,
  WrongStateError,
  ConflictError,
  PermissionDeniedError,
  NoSpaceError,
  TimeoutError,
  CancelledError,
  UnavailableError,
  ProtocolError,
  WorkerExitedError,
  InternalError,
  isErrorCode,
  fromWire,
  toAgentFenseError,
} from './errors.js';
export type { ErrorCode, WireError, AgentFenseErrorOptions } from './errors.js';
export {
  validateCommand,
  validateCwd,
  validateEnv,
  validateHostPath,
  validateSandboxFiles,
  validateSandboxId,
  validateTimeoutMs,
} from './runtime/input.js';
export type { SandboxFile } from './runtime/input.js';
export { PERMISSIONS, PATTERN_TYPES } from './permissions/types.js';
export type { Permission, PatternType, PermissionRule } from './permissions/types.js';
export { compileRules, RuleSet } from './permissions/ruleset.js';
export type { RuleSetOptions, VisibilityOptions } from './permissions/ruleset.js';
export { explain } from './permissions/explain.js';
export { validateRule, validateRules } from './permissions/validate.js';
export { inferPatternType } from './permissions/pattern.js';
export { atLeast, isPermission, permissionLevel } from './permissions/level.js';
export { normalizePath } from './permissions/normalize.js';
export type { Decision, Explanation, NormalizedRule, Visibility } from './permissions/types.js';
export { parseByteSize, parseCpus } from './runtime/sizes.js';
export { escapeControls, escapeJsonText, escapeLine, quotePath } from './text/terminal.js';
export { changeLine } from './text/change-line.js';
