// Public API of @agentfense/control: the library (Sandbox), the lower-level ControlPlane, presets and
// policy, sessions, and the servers behind `agentfense serve` (HTTP, gRPC).

// --- Presets (contract §8) ---
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

// --- Network policy (re-exported for library users: policies, presets, decisions, audit records) ---
export { CompiledPolicy, NETWORK_PRESETS, validateNetworkPolicy } from '@agentfense/network';
export type { SecretBinding, SecretInput } from '@agentfense/network';
export type {
  Decision,
  NetworkAuditEvent,
  NetworkMemoryOptions,
  NetworkMode,
  NetworkPolicy,
  NetworkPolicyInput,
  NetworkRule,
} from '@agentfense/network';

// --- Permission engine (re-exported for library users: explain a path under a rule set) ---
export { explain, compileRules } from '@agentfense/protocol';

// --- CLI ---
export { runCli, createProgram } from './cli/main.js';

// --- Sessions (contract §5): persistent shells inside a sandbox ---
export {
  createSession,
  STARTUP_TIMEOUT_MS,
  Session,
  INTERRUPT_GRACE_MS,
  KILL_GRACE_MS,
  newSessionId,
  isSessionId,
  assertSessionId,
  DEFAULT_SHELL,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_MAX_OUTPUT_BYTES,
  MAX_COMMAND_BYTES,
  MAX_STDIN_BYTES,
  SESSION_SHELLS,
} from '@agentfense/sessions';
export type {
  SessionInfo,
  CreateSessionOptions,
  SessionExecOptions,
  SessionExecResult,
  SessionRunResult,
  SessionCloseReason,
  SessionLogger,
  SessionShell,
} from '@agentfense/sessions';
export { SessionManager } from './sessions/manager.js';
export type { SessionManagerOptions } from './sessions/manager.js';

// --- Library: sandboxes over a local directory (contract §7) ---
export { Sandbox } from './library/sandbox.js';
export { resolveSecrets } from './secret-sources.js';
export type { SecretSource } from './secret-sources.js';
export type { SecretValueSource } from './sandboxes/secret-values.js';
export type { FromLocalOptions, RunBytesOptions, RunOptions, StreamOptions } from './library/sandbox.js';
export type { BytesOutput, OutputEncoding, RunResult, TextOutput } from '@agentfense/sessions';
export { ExecStream } from './library/exec-stream.js';
export type { ExecChunk } from './library/exec-stream.js';

// --- Control plane: the lower-level client (codebases, sandboxes) ---
export { AgentFense, ControlPlane, DEFAULT_REAP_INTERVAL_MS } from './control-plane.js';
export type { ControlPlaneOptions } from './control-plane-options.js';
export { CodebaseService, DEFAULT_MAX_UPLOAD_BYTES } from './codebases/service.js';
export type { UploadOptions, UploadSource } from './codebases/service.js';
export type { CodebaseInfo, CodebaseKind, FileEntry } from './codebases/types.js';
export { SandboxManager } from './sandboxes/manager.js';
export type { GcOptions, GcReport } from './sandboxes/gc.js';
export { SANDBOX_STATES } from './sandboxes/types.js';
export type {
  CheckpointInfo,
  CheckpointOptions,
  ForkOptions,
  RestoreOptions,
} from './sandboxes/checkpoints.js';
export { checkpointLimits, DEFAULT_CHECKPOINT_LIMITS } from './sandboxes/checkpoint-limits.js';
export type { CheckpointLimitOptions, CheckpointLimits } from './sandboxes/checkpoint-limits.js';
export type { CompactionStep } from './sandboxes/compactor.js';
export type {
  CreateSandboxOptions,
  ListSandboxesOptions,
  Page,
  SandboxExecOptions,
  SandboxInfo,
  SandboxState,
  SecretInfo,
} from './sandboxes/types.js';
export { TRANSITIONS, canTransition } from './sandboxes/state.js';
export { REMOTE_REASONS, RemoteSandboxError } from './placement/errors.js';
export type { RemoteReason } from './placement/errors.js';
export type { PlacementOptions } from './placement/options.js';
export type { SandboxBackend } from './placement/backend.js';
export { NodeAgentClient } from './placement/node-agent-client.js';
export type { NodeAgentEndpoint } from './placement/node-agent-client.js';
export { RuntimeRegistry } from './sandboxes/runtimes.js';
export type { RuntimeMap, RuntimeProvider } from './sandboxes/runtimes.js';
export { DEFAULT_SUPERVISION } from '@agentfense/fuse-worker';
export type { SupervisionOptions } from '@agentfense/fuse-worker';
export { WORKER_CGROUP_PARENT, workerMemoryBound } from '@agentfense/fuse-worker';
export type { WorkerMemoryOptions } from '@agentfense/fuse-worker';
export { NETWORK_CGROUP_PARENT, networkMemoryBound } from './sandboxes/network-cgroup.js';
export type { AuditQuery } from '@agentfense/audit-trail';

// --- HTTP API (contract §7): the server behind `agentfense serve`, embeddable in another process ---
export { API_VERSION, DEFAULT_BODY_LIMIT, createHttpServer } from './http/server.js';
export type { HttpServer, HttpServerOptions } from './http/server.js';
export { controlPlaneBackend } from './http/backend.js';
export type { HttpBackend, HttpCreateSandboxOptions, ListCodebasesOptions } from './http/backend.js';
export { toHttpStatus, toHttpError } from './http/errors.js';
export type { GatewayError } from './http/errors.js';
export { GrpcCode, GRPC_CODE_OF_ERROR, httpStatusFromGrpcCode, statusOf } from './api/status.js';
export type { ApiStatus } from './api/status.js';
export type { RegisteredRoute } from './http/openapi.js';
export { isLoopback, parseListen } from './http/auth.js';
export { API_TOKEN_FILE, apiTokenPath, ensureApiToken, readApiToken } from './http/api-token.js';
export type { ListenAddress } from './http/auth.js';

// --- gRPC API (sandbox.v1): the original's wire API, over the same backend as HTTP ---
export { MAX_RECEIVE_BYTES, createGrpcServer } from './grpc/server.js';
export type { GrpcServer, GrpcServerOptions } from './grpc/server.js';
export { ERROR_CODE_KEY } from './grpc/status.js';
export { EXIT_CODE_KEY } from './grpc/sandbox-service.js';

// --- Data directory, ids, paths ---
export { DATA_DIR_ENV, DataLayout, resolveDataDir } from './paths.js';
export type { SandboxPaths } from './paths.js';
export { ID_PREFIXES, isId, newId, validateId } from './ids.js';
export type { IdKind } from './ids.js';
export { splitCodebasePath } from './codebases/upload-path.js';
