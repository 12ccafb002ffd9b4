// The parts of a Pod the adapter reads: where it runs, its address, whether it is ready, and whether
// Kubernetes is taking it away (and why).

export interface PodCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

/** A Pod as the API returns it (timestamps may arrive as strings or, from the typed client, Dates). */
export interface Pod {
  metadata?: {
    name?: string;
    uid?: string;
    labels?: Record<string, string>;
    deletionTimestamp?: unknown;
    resourceVersion?: string;
    ownerReferences?: { kind?: string; name?: string; controller?: boolean }[];
  };
  spec?: { nodeName?: string };
  status?: { phase?: string; podIP?: string; hostIP?: string; conditions?: PodCondition[] };
}

export function condition(pod: Pod, type: string): PodCondition | undefined {
  return pod.status?.conditions?.find((c) => c.type === type);
}

/** Running on a node, with an address, and passing its readiness check. */
export function isServing(pod: Pod): boolean {
  return (
    pod.metadata?.deletionTimestamp == null &&
    pod.status?.phase === 'Running' &&
    typeof pod.spec?.nodeName === 'string' &&
    typeof pod.status.podIP === 'string' &&
    condition(pod, 'Ready')?.status === 'True'
  );
}

/** Kubernetes is removing this pod or has given up on it: deleted, being deleted, evicted or ended. */
export function isGoing(pod: Pod): boolean {
  return (
    pod.metadata?.deletionTimestamp != null ||
    condition(pod, 'DisruptionTarget')?.status === 'True' ||
    pod.status?.phase === 'Failed' ||
    pod.status?.phase === 'Succeeded'
  );
}

/**
 * Reasons Kubernetes gives (in the pod's DisruptionTarget condition) when it removes a pod because its
 * node went away: the taint manager's eviction from an unreachable or not-ready node, and the pod
 * garbage collector's clean-up on a node marked out of service.
 */
const NODE_REASONS = new Set(['DeletionByTaintManager', 'DeletionByPodGC']);

/** Whether a pod that is going went with its node rather than by itself. */
export function wentWithNode(pod: Pod): boolean {
  return NODE_REASONS.has(condition(pod, 'DisruptionTarget')?.reason ?? '');
}

/** Whether `pod`'s controlling owner is the `kind` named `name` (e.g. the node agent's DaemonSet). */
export function controlledBy(pod: Pod, kind: string, name: string): boolean {
  return (pod.metadata?.ownerReferences ?? []).some(
    (o) => o.controller === true && o.kind === kind && o.name === name,
  );
}
