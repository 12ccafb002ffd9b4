// Sandbox ids and the orchestrator object named after each: both adapters name their object (a
// SandboxClaim, a Swarm service) `sb-<uuid>`, since neither allows `_` in a name.
import { OrchestratorError } from './errors.js';

export const SANDBOX_ID = /^sb_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** `sb_<uuid>` → `sb-<uuid>` (a DNS label, 39 characters); anything else is an invalid request. */
export function sandboxObjectName(sandboxId: string): string {
  if (!SANDBOX_ID.test(sandboxId)) {
    throw new OrchestratorError('invalid-request', `not a sandbox id: ${JSON.stringify(sandboxId)}`);
  }
  return sandboxId.replace('_', '-');
}
