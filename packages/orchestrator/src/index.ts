// @agentfense/orchestrator: the orchestrator interface (place, watch, remove, locate), its errors, and
// the clean-up a returning node runs. Adapters live in sub-paths (`@agentfense/orchestrator/kubernetes`).
export type {
  Location,
  LostReason,
  Orchestrator,
  PlacementRequest,
  PlacementStatus,
  ResourceRequest,
  WarmPool,
  WatchOptions,
} from './types.js';
export { ORCHESTRATOR_REASONS, OrchestratorError } from './errors.js';
export type { OrchestratorReason } from './errors.js';
export { findLeftovers } from './leftovers.js';
export { SANDBOX_WAIT_COMMAND } from './sandbox-command.js';
