// The objects the Kubernetes adapter sends and reads: agent-sandbox's SandboxClaim, and the names and
// labels that tie a claim, its pod and a sandbox id together.
import { OrchestratorError } from '../errors.js';
import { SANDBOX_ID, sandboxObjectName } from '../names.js';
import type { PlacementRequest } from '../types.js';
import type { WarmPool } from './pools.js';

/** agent-sandbox's extensions API: SandboxClaim, SandboxTemplate, SandboxWarmPool. */
export const CLAIM_GROUP = 'extensions.agents.x-k8s.io';
export const CLAIM_VERSION = 'v1beta1';
export const CLAIM_PLURAL = 'sandboxclaims';

/** Every object the adapter creates carries this label, so its watch and list see only its own. */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'agentfense';
/** The sandbox id, on the claim (the claim's name cannot hold `_`). */
export const SANDBOX_ID_LABEL = 'agentfense.dev/sandbox-id';
/** agent-sandbox labels every pod it runs for a claim with the claim's uid. */
export const CLAIM_UID_LABEL = 'agents.x-k8s.io/claim-uid';

const LABEL_KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** The claim's name for a sandbox id: `sb_<uuid>` → `sb-<uuid>` (a DNS label, 39 characters). */
export function claimName(sandboxId: string): string {
  return sandboxObjectName(sandboxId);
}

/** The SandboxClaim subset the adapter reads. */
export interface SandboxClaim {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    deletionTimestamp?: string;
  };
  spec: {
    warmPoolRef: { name: string };
    lifecycle?: { shutdownPolicy?: 'Delete' | 'DeleteForeground' | 'Retain' };
  };
  status?: {
    conditions?: Condition[];
    sandbox?: { name?: string; podIPs?: string[] };
  };
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
}

function checkLabels(labels: Readonly<Record<string, string>>): void {
  for (const [key, value] of Object.entries(labels)) {
    if (!LABEL_KEY.test(key) || key.length > 316 || !LABEL_VALUE.test(value)) {
      throw new OrchestratorError('invalid-request', `not a Kubernetes label: ${key}=${value}`);
    }
    if (key === MANAGED_BY_LABEL || key === SANDBOX_ID_LABEL) {
      throw new OrchestratorError('invalid-request', `label ${key} is set by the adapter`);
    }
  }
}

/** The claim that asks agent-sandbox for one sandbox pod out of `pool`. */
export function buildClaim(request: PlacementRequest, pool: WarmPool, namespace: string): SandboxClaim {
  const name = claimName(request.sandboxId);
  checkLabels(request.labels ?? {});
  return {
    apiVersion: `${CLAIM_GROUP}/${CLAIM_VERSION}`,
    kind: 'SandboxClaim',
    metadata: {
      name,
      namespace,
      labels: { ...request.labels, [MANAGED_BY_LABEL]: MANAGED_BY, [SANDBOX_ID_LABEL]: request.sandboxId },
    },
    spec: {
      warmPoolRef: { name: pool.name },
      // Deleting the claim deletes its Sandbox and pod; the API tier decides when, never a timer.
      lifecycle: { shutdownPolicy: 'Delete' },
    },
  };
}

/** The sandbox id a claim stands for, or `undefined` for a claim that is not the adapter's. */
export function sandboxIdOf(claim: SandboxClaim): string | undefined {
  const labels = claim.metadata.labels ?? {};
  if (labels[MANAGED_BY_LABEL] !== MANAGED_BY) return undefined;
  const id = labels[SANDBOX_ID_LABEL];
  return id !== undefined && SANDBOX_ID.test(id) && claimName(id) === claim.metadata.name ? id : undefined;
}
