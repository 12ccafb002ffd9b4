// Public API of @agentfense/protocol: error kinds, the runtime contract and its shared helpers, the permission
// engine, the worker wire protocol.

// --- Everything short-lived processes need without the wire protocol (errors, permission engine, input
// checks, terminal quoting): one list, in core.ts, which the `./core` entry serves on its own ---
export * from './core.js';

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
  RuntimeTraits,
  DefaultResources,
  HostUser,
  ReservedUser,
} from './runtime.js';
export { CPU_PERIOD_US, DEFAULT_RESOURCES, NO_LIMITS, defaultResources } from './runtime.js';
export {
  NAMESPACE_FLAGS,
  SECCOMP_ARG_RULES,
  SECCOMP_DENIED_SYSCALLS,
  SECCOMP_DENY_ERRNO,
  SECCOMP_DENY_GROUPS,
  SECCOMP_ENOSYS_ERRNO,
  SECCOMP_ENOSYS_SYSCALLS,
  seccompRuleLines,
} from './runtime/seccomp.js';
export type { SeccompArgRule, SeccompDenyGroup } from './runtime/seccomp.js';
export { formatByteSize, parseByteSize, parseCpus } from './runtime/sizes.js';

// --- Runtime helpers shared by both runtimes (pure): input validation, audit argv masking ---
export { HOST_PATH_BOUNDARY, REDACTED, maskEnvValue, maskHostPaths } from './runtime/audit-mask.js';
export type { MaskArgvOptions, PathPlaceholder } from './runtime/audit-mask.js';

// --- Runtime helpers shared by both runtimes: the output cap and back-pressure, the timeout/abort triggers, stop-once,
// the long-lived process handle, finding host binaries ---
export {
  CappedOutput,
  DEFAULT_MAX_OUTPUT_BYTES,
  MAX_OUTPUT_BYTES_LIMIT,
  checkMaxOutputBytes,
} from './runtime/output-cap.js';
export { collectOutput } from './runtime/output-stream.js';
export type { CollectOutputOptions, CollectedOutput, OutputCallback } from './runtime/output-stream.js';
export { armTermination } from './runtime/termination.js';
export { StopGate } from './runtime/stop-gate.js';
export { execIo } from './runtime/exec-io.js';
export type { ExecIo } from './runtime/exec-io.js';
export { toSandboxProcess } from './runtime/sandbox-process.js';
export type { SandboxProcessParts } from './runtime/sandbox-process.js';
export { SYSTEM_BIN_DIRS, findExecutable } from './runtime/executable.js';
export { checkWorkspaceDir } from './runtime/workspace.js';
export { SANDBOX_PTY_MAX, devptsMountOptions } from './runtime/devpts.js';
export type { FindExecutableOptions } from './runtime/executable.js';
export type { TerminationOptions, TerminationTrigger } from './runtime/termination.js';

// --- Runtime logging surface (shared by both runtimes) ---
export { createStderrLogger } from './runtime/logger.js';
export { isSameProcess, processStartTime, selfIdentity } from './runtime/process-identity.js';
export { keepChildAlive } from './runtime/keep-alive.js';
export { processEnded } from './runtime/thread-group.js';

// --- cgroups (the sandboxes' in runtime-bwrap, the workers' in control) ---
export { detectCgroupHost } from './runtime/cgroups/detect.js';
export type { CgroupController, CgroupHost } from './runtime/cgroups/detect.js';
export {
  TEARDOWN_DEADLINE_MS,
  TEARDOWN_RETRY_MS,
  killPids,
  killUntilEmpty,
  makeCgroupDir,
  mkdirOnce,
  readControlSync,
  readPids,
  removeCgroupDir,
  removeParentIfEmpty,
  sharesToWeight,
  whileParentVanishes,
  writeControl,
} from './runtime/cgroups/files.js';
export type { RuntimeLogger } from './runtime/logger.js';

// --- Delta and audit data ---
export type {
  ChangeEntry,
  CommitMode,
  CommitConflict,
  CommitNote,
  CommitResult,
  AuditEvent,
} from './delta-types.js';

// --- Wire protocol ---
export { DEFAULT_MAX_FRAME_BYTES, FRAME_HEADER_BYTES, FrameDecoder, encodeFrame } from './wire/frames.js';
export type { FrameOptions } from './wire/frames.js';
export { createCodec } from './wire/codec.js';
export type { Codec } from './wire/codec.js';
export { MESSAGE_TYPES, PROTOCOL_VERSION, parseMessage } from './wire/messages.js';
export type {
  CancelMessage,
  ErrorResponseMessage,
  EventMessage,
  HelloMessage,
  Message,
  MessageType,
  RawWireError,
  ReadyMessage,
  RequestMessage,
  ResponseMessage,
  ShutdownMessage,
  SuccessResponseMessage,
} from './wire/messages.js';
export { createFramedTransport } from './wire/transport.js';
export type {
  FramedTransport,
  FramedTransportOptions,
  MessageTransport,
  Subscription,
} from './wire/transport.js';
export {
  DEFAULT_MAX_WRITE_BUFFER_BYTES,
  connectUnix,
  createSocketTransport,
  listenUnix,
} from './wire/socket.js';
export type {
  ConnectUnixOptions,
  ListenUnixOptions,
  SocketTransportOptions,
  UnixServer,
} from './wire/socket.js';
export { createTransportPair } from './wire/pair.js';
export type { PairTransport } from './wire/pair.js';
export { RpcPeer, toWireError } from './wire/rpc.js';
export type { HandlerContext, RequestHandler, RequestOptions, RpcPeerOptions } from './wire/rpc.js';
export { DEFAULT_HANDSHAKE_TIMEOUT_MS, clientHandshake, serverHandshake } from './wire/handshake.js';
export type { ClientHandshakeOptions, ServerHandshakeOptions } from './wire/handshake.js';
export {
  LOG_LEVELS,
  WORKER_EVENT_GUARDS,
  WORKER_METHOD_GUARDS,
  createWorkerClient,
  serveWorkerApi,
} from './wire/worker-api.js';
export type {
  DirIdentity,
  Empty,
  MountParams,
  WorkerClient,
  WorkerEvent,
  WorkerEvents,
  WorkerHandlers,
  WorkerHealthEvent,
  WorkerLogEvent,
  WorkerMethod,
  WorkerMethods,
  WorkerParams,
  WorkerResult,
  WorkerServer,
} from './wire/worker-api.js';
export type { FuseConnStats, OpStats, WarmupStats, WorkerStats } from './wire/worker-stats.js';
export type { Guard } from './wire/guards.js';
export { PART_BYTES, collectParts } from './wire/parts.js';
export type { ResultPart } from './wire/parts.js';
