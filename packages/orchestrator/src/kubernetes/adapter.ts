// The Kubernetes adapter: a sandbox is one SandboxClaim on agent-sandbox's warm pools. Placing creates
// the claim, watching follows the adapter's claims and their pods, removing deletes the claim (agent-
// sandbox deletes its Sandbox and pod), and locating finds the serving pod's node and the node agent on
// it. Nothing is kept between calls but what the API server holds, so any API replica can serve them.
import { OrchestratorError } from '../errors.js';
import { runWatch, type StatusQueue } from '../queue.js';
import type { Location, Orchestrator, PlacementRequest, PlacementStatus, WatchOptions } from '../types.js';
import { PlacementBook } from './book.js';
import { apiError, statusOf, type KubeApi } from './client.js';
import { runInformer } from './informer.js';
import {
  CLAIM_GROUP,
  CLAIM_PLURAL,
  CLAIM_UID_LABEL,
  CLAIM_VERSION,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  buildClaim,
  claimName,
  type SandboxClaim,
} from './objects.js';
import { controlledBy, isServing, type Pod } from './pods.js';
import { choosePool, type WarmPool } from './pools.js';

/** How the node agents are found: the DaemonSet's pods, by label, on the sandbox's node. */
export interface NodeAgentLookup {
  readonly namespace: string;
  /** The DaemonSet that must control a node agent's pod (a matching label alone is not enough). */
  readonly daemonSet: string;
  readonly labelSelector: string;
  /** The port the node agent listens on (its pod's address is the host part). */
  readonly port: number;
}

export interface KubernetesOrchestratorOptions {
  /** The API calls; `kubeApiFrom(kubeConfig)`. */
  readonly api: KubeApi;
  /** The namespace of the claims, the warm pools and the sandbox pods. */
  readonly namespace: string;
  /** The warm pools a placement may claim from. */
  readonly pools: readonly WarmPool[];
  readonly nodeAgent: NodeAgentLookup;
  /** Failed lists and watches while watching (each is retried). */
  readonly onError?: (error: unknown) => void;
  /** Wait before retrying a failed list or watch; 1 s by default. */
  readonly retryDelayMs?: number;
}

const MANAGED = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;

export class KubernetesOrchestrator implements Orchestrator {
  constructor(private readonly options: KubernetesOrchestratorOptions) {}

  async place(request: PlacementRequest): Promise<void> {
    const { api, namespace, pools } = this.options;
    const claim = buildClaim(request, choosePool(pools, request), namespace);
    try {
      await api.createClaim(namespace, claim);
    } catch (error) {
      const status = statusOf(error);
      if (status === 409) {
        throw new OrchestratorError('already-placed', `${request.sandboxId} is already placed`, {
          cause: error,
        });
      }
      if (status === 422 || status === 400) {
        throw new OrchestratorError('invalid-request', `the API server refused the claim: ${status}`, {
          cause: error,
        });
      }
      throw apiError(`creating the claim of ${request.sandboxId}`, error);
    }
  }

  async remove(sandboxId: string): Promise<void> {
    const name = claimName(sandboxId);
    try {
      await this.options.api.deleteClaim(this.options.namespace, name);
    } catch (error) {
      throw apiError(`deleting the claim of ${sandboxId}`, error);
    }
  }

  async locate(sandboxId: string): Promise<Location | undefined> {
    const { api, namespace, nodeAgent } = this.options;
    const name = claimName(sandboxId);
    let claim: SandboxClaim | undefined;
    let pods: Pod[];
    try {
      claim = await api.getClaim(namespace, name);
      const uid = claim?.metadata.uid;
      const ready = claim?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
      if (uid === undefined || !ready) return undefined;
      pods = (await api.listPods(namespace, { labelSelector: `${CLAIM_UID_LABEL}=${uid}` })).items;
    } catch (error) {
      throw apiError(`locating ${sandboxId}`, error);
    }
    const pod = pods.find(isServing);
    if (pod === undefined) return undefined;
    const nodeName = pod.spec!.nodeName!;
    let agents: Pod[];
    try {
      const selectors = {
        labelSelector: nodeAgent.labelSelector,
        fieldSelector: `spec.nodeName=${nodeName}`,
      };
      agents = (await api.listPods(nodeAgent.namespace, selectors)).items;
    } catch (error) {
      throw apiError(`finding the node agent on ${nodeName}`, error);
    }
    // The field selector is the server's filter; the node is checked again so a wider answer cannot
    // route a sandbox to another node's agent, and the pod must be the DaemonSet's, not any pod that
    // copied its labels.
    const agent = agents.find(
      (a) =>
        isServing(a) && a.spec?.nodeName === nodeName && controlledBy(a, 'DaemonSet', nodeAgent.daemonSet),
    );
    if (agent === undefined) {
      throw new OrchestratorError('no-node-agent', `no ready node agent on ${nodeName}`, {
        details: { nodeName },
      });
    }
    return {
      sandboxId,
      nodeName,
      podIP: pod.status!.podIP!,
      nodeAgent: { host: agent.status!.podIP!, port: nodeAgent.port },
    };
  }

  watch(options: WatchOptions = {}): AsyncGenerator<PlacementStatus> {
    return runWatch<PlacementStatus>(options.signal, (signal, queue) => this.informers(signal, queue));
  }

  /** The claims' and the pods' informers, feeding one book of placements. */
  private informers(signal: AbortSignal, queue: StatusQueue<PlacementStatus>): Promise<unknown> {
    const { api, namespace } = this.options;
    const book = new PlacementBook();
    const common = {
      api,
      signal,
      onError: this.options.onError,
      retryDelayMs: this.options.retryDelayMs,
    };
    const claimsQuery = { labelSelector: MANAGED };
    const podsQuery = { labelSelector: CLAIM_UID_LABEL };
    return Promise.all([
      runInformer<SandboxClaim>({
        ...common,
        path: `/apis/${CLAIM_GROUP}/${CLAIM_VERSION}/namespaces/${namespace}/${CLAIM_PLURAL}`,
        query: claimsQuery,
        list: () => api.listClaims(namespace, MANAGED),
        onList: (items) => queue.push(...book.resetClaims(items)),
        onChange: (type, claim) => queue.push(...book.claimChanged(type, claim)),
      }),
      runInformer<Pod>({
        ...common,
        path: `/api/v1/namespaces/${namespace}/pods`,
        query: podsQuery,
        list: () => api.listPods(namespace, podsQuery),
        onList: (items) => queue.push(...book.resetPods(items)),
        onChange: (type, pod) => queue.push(...book.podChanged(type, pod)),
      }),
    ]);
  }
}
