// Orchestrator failures carry one of AgentFense's closed error codes (so every face maps them as it maps
// any other failure) and a closed orchestrator reason that says which step failed.
import { AgentFenseError, type ErrorCode } from '@agentfense/protocol';

/** Which step failed; clients and logs match on these. Never rename one. */
export const ORCHESTRATOR_REASONS = [
  /** The placement request is malformed (id, image, resources, labels). */
  'invalid-request',
  /** No configured pool offers the image and resources asked for. */
  'no-pool-fits',
  /** The sandbox is already placed. */
  'already-placed',
  /** The sandbox is ready on a node, but no ready node agent runs there. */
  'no-node-agent',
  /** The orchestrator's API refused the adapter's credentials (RBAC). */
  'forbidden',
  /** The orchestrator's API could not be reached or failed. */
  'unavailable',
  /** The orchestrator's API answered with something the adapter cannot read. */
  'bad-response',
] as const;

export type OrchestratorReason = (typeof ORCHESTRATOR_REASONS)[number];

const CODES: Record<OrchestratorReason, ErrorCode> = {
  'invalid-request': 'AF_INVALID_ARGUMENT',
  'no-pool-fits': 'AF_INVALID_ARGUMENT',
  'already-placed': 'AF_ALREADY_EXISTS',
  'no-node-agent': 'AF_UNAVAILABLE',
  forbidden: 'AF_PERMISSION_DENIED',
  unavailable: 'AF_UNAVAILABLE',
  'bad-response': 'AF_PROTOCOL',
};

export class OrchestratorError extends AgentFenseError {
  readonly code: ErrorCode;
  readonly reason: OrchestratorReason;

  constructor(
    reason: OrchestratorReason,
    message: string,
    options: { cause?: unknown; details?: Record<string, string> } = {},
  ) {
    super(message, { cause: options.cause, details: { ...options.details, reason } });
    this.reason = reason;
    this.code = CODES[reason];
  }
}
