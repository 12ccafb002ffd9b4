// Public API of @agentfense/protocol: error kinds, the permission engine, the worker wire protocol.

// --- Errors ---
export {
  ERROR_CODES,
  AgentFenseError,
  InvalidArgumentError,
  NotFoundError,
  AlreadyExistsError,
  WrongStateError,
  ConflictError,
  PermissionDeniedError,
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

// --- Runtime contract (implemented by @agentfense/runtime-bwrap and @agentfense/runtime-docker) ---
export type {
  ResourceLimits,
  EnforcedLimits,
  RuntimeStartOptions,
  ExecOptions,
  ExecAudit,
  ExecResult,
  SpawnOptions,
  SandboxProcess,
  RuntimeInstance,
  SandboxRuntime,
} from './runtime.js';

// --- Permission rules ---
export { PERMISSIONS, PATTERN_TYPES } from './permissions/types.js';
export type { Permission, PatternType, PermissionRule } from './permissions/types.js';

// --- Delta and audit data ---
export type { ChangeEntry, CommitMode, CommitConflict, CommitResult, AuditEvent } from './delta-types.js';
