// The sandbox state machine (contract §6) as data: which transitions exist, checked in one place.
import { WrongStateError } from '@agentfense/protocol';
import type { SandboxState } from './types.js';

/**
 * Allowed transitions. PENDING → RUNNING (first start); RUNNING ⇄ STOPPED; any → ERROR (worker or mount
 * failures, a failed start); ERROR → RUNNING (start again once the cause is fixed); ERROR/PENDING → STOPPED
 * (recovery after the owning process died). Destroy is allowed from every state and is not a state.
 */
export const TRANSITIONS: Readonly<Record<SandboxState, readonly SandboxState[]>> = {
  PENDING: ['RUNNING', 'STOPPED', 'ERROR'],
  RUNNING: ['STOPPED', 'ERROR'],
  STOPPED: ['RUNNING', 'ERROR'],
  ERROR: ['RUNNING', 'STOPPED'],
};

/** True when `from → to` is a transition of the state machine. */
export function canTransition(from: SandboxState, to: SandboxState): boolean {
  return TRANSITIONS[from].includes(to);
}

/** Throws WrongStateError naming the sandbox when `from → to` is not allowed. */
export function assertTransition(id: string, from: SandboxState, to: SandboxState): void {
  if (!canTransition(from, to)) {
    throw new WrongStateError(`sandbox ${id} is ${from} and cannot become ${to}`, {
      details: { id, state: from, wanted: to },
    });
  }
}
