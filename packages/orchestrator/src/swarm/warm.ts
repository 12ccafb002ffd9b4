// A warm pool on Swarm (what agent-sandbox's SandboxWarmPool is on Kubernetes): sandbox services placed
// ahead of time, labelled `agentfense.dev/warm=unclaimed`, each under a fresh placement id whose
// container waits, like any sandbox's, for a node agent to attach a view and af-init. Nothing is attached
// in an idle one: it has no codebase, no rules and no network. A claim relabels its service `claimed`
// (the service's labels only, so its running container is kept) after the API tier's database decided
// the claim; a claimed service is removed with its sandbox and never listed as idle again. An idle one the
// pool no longer wants (more than its size, or a claim that never finished) is first relabelled `retired`
// at the version read, so a claim racing it fails instead of getting a service about to be removed.
import { randomUUID } from 'node:crypto';
import type { ResourceRequest, WarmPool } from '../types.js';
import type { SwarmApi } from './engine.js';
import { sandboxIdOfService, serviceName, type SwarmNode, type SwarmService } from './objects.js';
import { servingTask } from './tracker.js';

export const WARM_LABEL = 'agentfense.dev/warm';
export const CLAIMED_BY_LABEL = 'agentfense.dev/claimed-by';
const IDLE = `${WARM_LABEL}=unclaimed`;
const RETIRED = `${WARM_LABEL}=retired`;

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

  /** The adapter's services labelled `state` (the filter is the manager's; the adapter's labels are checked). */
  async #services(state: 'unclaimed' | 'retired'): Promise<SwarmService[]> {
    const listed = await this.options.api.listServices(state === 'unclaimed' ? IDLE : RETIRED);
    return listed.filter((s) => sandboxIdOfService(s) !== undefined && s.Spec.Labels?.[WARM_LABEL] === state);
  }

  #idleServices(): Promise<SwarmService[]> {
    return this.#services('unclaimed');
  }

  async unclaimed(): Promise<string[]> {
    return (await this.#idleServices()).map((s) => sandboxIdOfService(s)!);
  }

  async retire(placementId: string): Promise<boolean> {
    const service = await this.options.api.inspectService(serviceName(placementId));
    if (service === undefined || sandboxIdOfService(service) !== placementId) return false;
    return this.#retire(service);
  }

  /** Relabels an idle service `retired` at the version read, then removes it; false if it was not idle. */
  async #retire(service: SwarmService): Promise<boolean> {
    const { api } = this.options;
    if (service.Spec.Labels?.[WARM_LABEL] !== 'unclaimed') return false;
    if (!(await api.relabelService(service, { ...service.Spec.Labels, [WARM_LABEL]: 'retired' })))
      return false;
    await api.removeService(service.Spec.Name);
    return true;
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

  /**
   * Removes what a replica that died half-way through a retirement left, and idle services beyond the
   * size (two replicas topping up at once, a restart with a smaller size) newest first (claims take the
   * oldest); then places idle ones up to the size.
   */
  async refill(): Promise<void> {
    const { api, size, shape, place } = this.options;
    for (const retired of await this.#services('retired')) await api.removeService(retired.Spec.Name);
    const fitting = (await this.#idleServices())
      .filter((s) => fits(s, shape))
      .sort((a, b) => (b.CreatedAt ?? '').localeCompare(a.CreatedAt ?? ''));
    let have = fitting.length;
    for (const extra of fitting.slice(0, Math.max(0, have - size))) {
      // A claim that won the race keeps its service; it no longer counts as idle either way.
      await this.#retire(extra);
      have--;
    }
    for (let i = have; i < size; i++) {
      await place({ ...shape, sandboxId: `sb_${randomUUID()}`, labels: { [WARM_LABEL]: 'unclaimed' } });
    }
  }
}
