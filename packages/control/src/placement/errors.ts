// The closed error set of sandboxes placed through an orchestrator. Each reason has one of AgentFense's
// error codes, so the HTTP, gRPC and MCP faces map it as they map any other failure (one mapping, at
// their boundary), and `details.reason` says which step failed. Messages never carry the node agent's
// token: the client builds them from the route and the node agent's own answer only.
import { AgentFenseError, type ErrorCode } from '@agentfense/protocol';

/** Why a call to an orchestrated sandbox failed. Never rename one: clients and logs match on them. */
export const REMOTE_REASONS = [
  /** The node agent on the sandbox's node did not answer (connection refused, reset, timed out). */
  'node-agent-unreachable',
  /** The sandbox has no running placement now: not started, being placed, or lost and not yet back. */
  'not-placed',
  /** The orchestrator did not place the sandbox, or its node agent refused to attach it. */
  'placement-failed',
  /** The call exists for sandboxes this process runs, not yet for sandboxes on cluster nodes. */
  'not-routed',
] as const;

export type RemoteReason = (typeof REMOTE_REASONS)[number];

const CODES: Record<RemoteReason, ErrorCode> = {
  'node-agent-unreachable': 'AF_UNAVAILABLE',
  'not-placed': 'AF_WRONG_STATE',
  'placement-failed': 'AF_UNAVAILABLE',
  'not-routed': 'AF_WRONG_STATE',
};

export class RemoteSandboxError extends AgentFenseError {
  readonly code: ErrorCode;
  readonly reason: RemoteReason;

  constructor(
    reason: RemoteReason,
    message: string,
    options: { cause?: unknown; details?: Record<string, string> } = {},
  ) {
    super(message, { cause: options.cause, details: { ...options.details, reason } });
    this.reason = reason;
    this.code = CODES[reason];
  }
}
