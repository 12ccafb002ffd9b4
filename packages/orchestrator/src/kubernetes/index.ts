// The Kubernetes adapter over kubernetes-sigs/agent-sandbox: SandboxClaims on warm pools.
export { KubernetesOrchestrator } from './adapter.js';
export type { KubernetesOrchestratorOptions, NodeAgentLookup } from './adapter.js';
export { kubeApiFrom } from './client.js';
export type { KubeApi, ObjectList, WatchEvent, WatchHandle } from './client.js';
export { choosePool } from './pools.js';
export type { WarmPool } from './pools.js';
export {
  CLAIM_GROUP,
  CLAIM_PLURAL,
  CLAIM_UID_LABEL,
  CLAIM_VERSION,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  SANDBOX_ID_LABEL,
  buildClaim,
  claimName,
} from './objects.js';
export type { Condition, SandboxClaim } from './objects.js';
export type { Pod, PodCondition } from './pods.js';
