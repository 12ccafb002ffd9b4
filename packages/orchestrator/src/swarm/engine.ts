// The adapter's few calls to a Swarm manager's Engine API, over runtime-docker's client (undici on the
// manager's socket or TCP address). Every failure leaves here as an OrchestratorError with one of the
// package's closed reasons, so the adapter maps nothing itself.
import { EngineApiError, EngineUnreachableError, type EngineApi } from '@agentfense/runtime-docker';
import { OrchestratorError } from '../errors.js';
import type { SwarmNode, SwarmService, SwarmServiceSpec, SwarmTask } from './objects.js';

/** A request that takes longer than this on a manager is treated as the manager being unavailable. */
const REQUEST_TIMEOUT_MS = 15_000;

export interface SwarmApi {
  /** Resolves the new service's id. */
  createService(spec: SwarmServiceSpec): Promise<string>;
  /** Resolves `false` when there was no such service. */
  removeService(name: string): Promise<boolean>;
  inspectService(name: string): Promise<SwarmService | undefined>;
  listServices(label: string): Promise<SwarmService[]>;
  /**
   * Replaces the service's labels (the service's own, not its containers': its task keeps running), at
   * the version read: `false` when the service changed or went meanwhile.
   */
  relabelService(service: SwarmService, labels: Readonly<Record<string, string>>): Promise<boolean>;
  listTasks(filters?: Readonly<Record<string, readonly string[]>>): Promise<SwarmTask[]>;
  listNodes(): Promise<SwarmNode[]>;
}

/** A failed call as an OrchestratorError: refused as invalid, forbidden, or the manager unavailable. */
export function swarmError(action: string, error: unknown): OrchestratorError {
  if (error instanceof OrchestratorError) return error;
  if (error instanceof EngineApiError) {
    const said = `${action}: the Swarm manager answered ${error.status}: ${error.message}`;
    if (error.status === 409) return new OrchestratorError('already-placed', said, { cause: error });
    if (error.status === 400) return new OrchestratorError('invalid-request', said, { cause: error });
    if (error.status === 401 || error.status === 403) {
      return new OrchestratorError('forbidden', said, { cause: error });
    }
    // 503 is "not a swarm manager" or "no leader": another manager, or this one later, can serve.
    return new OrchestratorError('unavailable', said, { cause: error });
  }
  if (error instanceof SyntaxError) {
    return new OrchestratorError('bad-response', `${action}: the manager's answer is not JSON`, {
      cause: error,
    });
  }
  const why = error instanceof EngineUnreachableError ? error.message : String(error);
  return new OrchestratorError('unavailable', `${action}: ${why}`, { cause: error });
}

function list<T>(value: unknown, what: string): T[] {
  if (!Array.isArray(value)) {
    throw new OrchestratorError('bad-response', `the manager's ${what} list is not an array`);
  }
  return value as T[];
}

async function call<T>(action: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw swarmError(action, error);
  }
}

function isNotFound(error: unknown): boolean {
  return error instanceof EngineApiError && error.status === 404;
}

/** The calls over one Engine API client (`createEngineApi('unix:///run/docker.sock')`). */
export function swarmApiFrom(engine: EngineApi): SwarmApi {
  const options = { timeoutMs: REQUEST_TIMEOUT_MS };
  const filtered = (filters: Readonly<Record<string, readonly string[]>>) => ({
    ...options,
    query: { filters: JSON.stringify(filters) },
  });
  return {
    createService: (spec) =>
      call(`creating service ${spec.Name}`, async () => {
        const created = await engine.request<{ ID?: unknown }>('POST', '/services/create', {
          ...options,
          body: spec,
        });
        if (typeof created?.ID !== 'string') {
          throw new OrchestratorError('bad-response', `the manager created ${spec.Name} without an id`);
        }
        return created.ID;
      }),
    removeService: (name) =>
      call(`removing service ${name}`, async () => {
        try {
          await engine.request('DELETE', `/services/${encodeURIComponent(name)}`, options);
          return true;
        } catch (error) {
          if (isNotFound(error)) return false;
          throw error;
        }
      }),
    inspectService: (name) =>
      call(`reading service ${name}`, async () => {
        try {
          return await engine.request<SwarmService>('GET', `/services/${encodeURIComponent(name)}`, options);
        } catch (error) {
          if (isNotFound(error)) return undefined;
          throw error;
        }
      }),
    relabelService: (service, labels) =>
      call(`relabelling service ${service.Spec.Name}`, async () => {
        try {
          await engine.request('POST', `/services/${encodeURIComponent(service.ID)}/update`, {
            ...options,
            query: { version: String(service.Version?.Index ?? 0) },
            body: { ...service.Spec, Labels: labels },
          });
          return true;
        } catch (error) {
          // 404: removed; 500 "update out of sequence": another update came first (the manager's answer).
          if (isNotFound(error) || /out of sequence/i.test(String(error))) return false;
          throw error;
        }
      }),
    listServices: (label) =>
      call('listing services', async () =>
        list<SwarmService>(await engine.request('GET', '/services', filtered({ label: [label] })), 'service'),
      ),
    listTasks: (filters = {}) =>
      call('listing tasks', async () =>
        list<SwarmTask>(await engine.request('GET', '/tasks', filtered(filters)), 'task'),
      ),
    listNodes: () =>
      call('listing nodes', async () =>
        list<SwarmNode>(await engine.request('GET', '/nodes', options), 'node'),
      ),
  };
}
