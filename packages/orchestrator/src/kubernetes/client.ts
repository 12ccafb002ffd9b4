// The adapter's few calls to the Kubernetes API, over @kubernetes/client-node. Everything the adapter
// does goes through `KubeApi`, built from a KubeConfig: tests point that KubeConfig at a server that
// answers with recorded API responses, so the client library's own requests are what gets tested.
import { CoreV1Api, CustomObjectsApi, Watch, type KubeConfig } from '@kubernetes/client-node';
import { OrchestratorError } from '../errors.js';
import { CLAIM_GROUP, CLAIM_PLURAL, CLAIM_VERSION, type SandboxClaim } from './objects.js';
import type { Pod } from './pods.js';

export interface ObjectList<T> {
  readonly items: T[];
  readonly resourceVersion: string;
}

/** One line of a watch stream: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR (a Status object). */
export interface WatchEvent {
  readonly type: string;
  readonly object: unknown;
}

export interface WatchHandle {
  abort(): void;
}

export interface KubeApi {
  createClaim(namespace: string, claim: SandboxClaim): Promise<SandboxClaim>;
  /** Resolves `false` when there was no such claim. */
  deleteClaim(namespace: string, name: string): Promise<boolean>;
  getClaim(namespace: string, name: string): Promise<SandboxClaim | undefined>;
  listClaims(namespace: string, labelSelector: string): Promise<ObjectList<SandboxClaim>>;
  listPods(
    namespace: string,
    selectors: { labelSelector?: string; fieldSelector?: string },
  ): Promise<ObjectList<Pod>>;
  /** Starts a watch; `onDone` runs once, with the error that ended it or `null` when the server closed it. */
  watch(
    path: string,
    query: Record<string, string>,
    onEvent: (event: WatchEvent) => void,
    onDone: (error: unknown) => void,
  ): Promise<WatchHandle>;
}

/** The HTTP status of a failed API call, when it has one. */
export function statusOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, statusCode } = error as { code?: unknown; statusCode?: unknown };
  if (typeof code === 'number') return code;
  return typeof statusCode === 'number' ? statusCode : undefined;
}

/** A failed API call as an OrchestratorError: 401/403 forbidden, anything else unavailable. */
export function apiError(what: string, error: unknown): OrchestratorError {
  const status = statusOf(error);
  const reason = status === 401 || status === 403 ? 'forbidden' : 'unavailable';
  return new OrchestratorError(reason, `${what}: ${status ?? (error as Error).message}`, { cause: error });
}

function listOf<T>(answer: unknown): ObjectList<T> {
  const raw = answer as { items?: unknown; metadata?: { resourceVersion?: string } } | null;
  if (!Array.isArray(raw?.items)) throw new OrchestratorError('bad-response', 'a list without items');
  return { items: raw.items as T[], resourceVersion: raw.metadata?.resourceVersion ?? '' };
}

export function kubeApiFrom(config: KubeConfig): KubeApi {
  const custom = config.makeApiClient(CustomObjectsApi);
  const core = config.makeApiClient(CoreV1Api);
  const watcher = new Watch(config);
  const claims = { group: CLAIM_GROUP, version: CLAIM_VERSION, plural: CLAIM_PLURAL };
  return {
    async createClaim(namespace, claim) {
      return (await custom.createNamespacedCustomObject({
        ...claims,
        namespace,
        body: claim,
      })) as SandboxClaim;
    },
    async deleteClaim(namespace, name) {
      try {
        await custom.deleteNamespacedCustomObject({
          ...claims,
          namespace,
          name,
          propagationPolicy: 'Background',
        });
        return true;
      } catch (error) {
        if (statusOf(error) === 404) return false;
        throw error;
      }
    },
    async getClaim(namespace, name) {
      try {
        return (await custom.getNamespacedCustomObject({ ...claims, namespace, name })) as SandboxClaim;
      } catch (error) {
        if (statusOf(error) === 404) return undefined;
        throw error;
      }
    },
    async listClaims(namespace, labelSelector) {
      const list: unknown = await custom.listNamespacedCustomObject({ ...claims, namespace, labelSelector });
      return listOf<SandboxClaim>(list);
    },
    async listPods(namespace, selectors) {
      const list = await core.listNamespacedPod({ namespace, ...selectors });
      return listOf<Pod>(list);
    },
    async watch(path, query, onEvent, onDone) {
      const controller = await watcher.watch(
        path,
        query,
        (type: string, object: unknown) => onEvent({ type, object }),
        onDone,
      );
      return { abort: () => controller.abort() };
    },
  };
}
