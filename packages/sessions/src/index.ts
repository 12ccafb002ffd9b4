// @agentfense/sessions: persistent shells inside a sandbox (contract §5), built only on
// RuntimeInstance.spawn(). The control plane runs them over its local runtimes; the node agent runs them
// over af-init for sandboxes placed on cluster nodes, so a session lives where its sandbox runs.
export { createSession, STARTUP_TIMEOUT_MS } from './create.js';
export { Session, INTERRUPT_GRACE_MS, KILL_GRACE_MS } from './session.js';
export type { SessionInfo } from './session.js';
export { newSessionId, isSessionId, assertSessionId } from './ids.js';
export {
  DEFAULT_SHELL,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_MAX_OUTPUT_BYTES,
  MAX_COMMAND_BYTES,
  MAX_STDIN_BYTES,
} from './options.js';
export type {
  CreateSessionOptions,
  SessionExecOptions,
  SessionExecResult,
  SessionRunResult,
  SessionCloseReason,
  SessionLogger,
} from './options.js';
export { SESSION_SHELLS } from './script.js';
export type { SessionShell } from './script.js';
export { decodeOutput, splitEncoding } from './output.js';
export type { BytesOutput, Decoded, OutputEncoding, RunResult, TextOutput } from './output.js';
