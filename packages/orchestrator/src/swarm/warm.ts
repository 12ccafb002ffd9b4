// A warm pool on Swarm (what agent-sandbox's SandboxWarmPool is on Kubernetes): sandbox services placed
// ahead of time, labelled `agentfense.dev/warm=unclaimed`, each under a fresh placement id whose
// container waits, like any sandbox's, for a node agent to attach a view and af-init. Nothing is attached
// in an idle one: it has no codebase, no rules and no network. A claim relabels its service `claimed`
// (the service's labels only, so its running container is kept) after the API tier's database decided
// the claim; a claimed service is removed with its sandbox and never listed as idle again.
import { randomUUID } from 'node:crypto';
import type { ResourceRequest, WarmPool } from '../types.js';
import type { SwarmApi } from './engine.js';
import { sandboxIdOfService, serviceName, type SwarmNode, type SwarmService } from './objects.js';
import { servingTask } from './tracker.js';

export const WARM_LABEL = 'agentfense.dev/warm';
export const CLAIMED_BY_LABEL = 'agentfense.dev/claimed-by';
const IDLE = `${WARM_LABEL}=unclaimed`;

/** The one shape the pool's placements have (a claim takes only a placement of exactly its shape). */
export interface WarmShape {
  readonly image: string;
  readonly resources: ResourceRequest;
}

export interface SwarmWarmPoolOptions {
  readonly api: SwarmApi;
  /** Places one service as the adapter places any sandbox's, with the extra labels. */
  readonly place: (
    request: WarmShape & { sandboxId: string; labels: Record<string, string> },
  ) => Promise<void>;
  /** Idle placements kept across the cluster. */
  readonly size: number;
  readonly shape: WarmShape;
}

function fits(service: SwarmService, shape: WarmShape): boolean {
  const template = service.Spec.TaskTemplate;
  const reserved = template?.Resources?.Reservations;
  return (
    template?.ContainerSpec?.Image === shape.image &&
    reserved?.NanoCPUs === shape.resources.cpuMillis * 1_000_000 &&
    reserved.MemoryBytes === shape.resources.memoryBytes
  );
}

export class SwarmWarmPool implements WarmPool {
  constructor(private readonly options: SwarmWarmPoolOptions) {}

  /** The adapter's idle services (the label filter is the manager's; the adapter's own labels are checked). */
  async #idleServices(): Promise<SwarmService[]> {
    const listed = await this.options.api.listServices(IDLE);
    return listed.filter(
      (s) => sandboxIdOfService(s) !== undefined && s.Spec.Labels?.[WARM_LABEL] === 'unclaimed',
    );
  }

  async idle(shape: WarmShape): Promise<string[]> {
    const services = (await this.#idleServices()).filter((s) => fits(s, shape));
    if (services.length === 0) return [];
    const { api } = this.options;
    const [tasks, nodes] = await Promise.all([
      api.listTasks({ service: services.map((s) => s.ID) }),
      api.listNodes(),
    ]);
    const byNode = new Map<string, SwarmNode>(nodes.map((n) => [n.ID, n]));
    return services
      .filter(
        (s) =>
          servingTask(
            tasks.filter((t) => t.ServiceID === s.ID),
            byNode,
          ) !== undefined,
      )
      .sort((a, b) => (a.CreatedAt ?? '').localeCompare(b.CreatedAt ?? ''))
      .map((s) => sandboxIdOfService(s)!);
  }

  async markClaimed(placementId: string, sandboxId: string): Promise<boolean> {
    const { api } = this.options;
    const service = await api.inspectService(serviceName(placementId));
    if (service === undefined || sandboxIdOfService(service) !== placementId) return false;
    if (service.Spec.Labels?.[WARM_LABEL] !== 'unclaimed') return false;
    return api.relabelService(service, {
      ...service.Spec.Labels,
      [WARM_LABEL]: 'claimed',
      [CLAIMED_BY_LABEL]: sandboxId,
    });
  }

  async refill(): Promise<void> {
    const { size, shape, place } = this.options;
    const have = (await this.#idleServices()).filter((s) => fits(s, shape)).length;
    for (let i = have; i < size; i++) {
      await place({ ...shape, sandboxId: `sb_${randomUUID()}`, labels: { [WARM_LABEL]: 'unclaimed' } });
    }
  }
}
