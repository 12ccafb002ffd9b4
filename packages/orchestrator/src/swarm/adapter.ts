// The Docker Swarm adapter: a sandbox is one one-replica service. Placing creates the service (Swarm
// picks a node with the reserved CPU and memory free), watching polls the adapter's services, their tasks
// and the nodes (the Engine API has no task events; faster while a new sandbox is pending), removing
// deletes the service (Swarm stops its
// container), and locating finds the node of the running task and the node agent there. Nothing is kept
// between calls but what the Swarm managers hold, so any API replica can serve them.
import { setTimeout as sleep } from 'node:timers/promises';
import { OrchestratorError } from '../errors.js';
import { runWatch, type StatusQueue } from '../queue.js';
import type { Location, Orchestrator, PlacementRequest, PlacementStatus, WatchOptions } from '../types.js';
import type { SwarmApi } from './engine.js';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  buildServiceSpec,
  sandboxIdOfService,
  serviceName,
  taskAddress,
  type SwarmNode,
  type SwarmService,
  type SwarmTask,
} from './objects.js';
import { SwarmTracker, nodeName, servingTask } from './tracker.js';
import { SwarmWarmPool, WARM_LABEL, type WarmShape } from './warm.js';

/** How the node agents are found: one on every node that carries `nodeLabel=true`, at `port`. */
export interface SwarmNodeAgent {
  /** The node agent's port on its node's address. */
  readonly port: number;
  /**
   * A node label the operator sets where a node agent is installed (the agent runs outside Swarm).
   * Sandboxes are placed only on such nodes, and `locate` refuses a node that lost it. Unset: every node.
   */
  readonly nodeLabel?: string;
}

export interface SwarmOrchestratorOptions {
  /** The calls to a Swarm manager; `swarmApiFrom(createEngineApi('unix:///run/docker.sock'))`. */
  readonly api: SwarmApi;
  readonly nodeAgent: SwarmNodeAgent;
  /** More placement constraints for every sandbox service (`node.labels.zone==b`, `node.role==worker`). */
  readonly constraints?: readonly string[];
  /** Wait before Swarm starts a sandbox's container again; 1 s by default. */
  readonly restartDelayMs?: number;
  /** The most processes in a sandbox's container; 1024 by default. */
  readonly pidsLimit?: number;
  /** How often the watch reads the services, tasks and nodes; 1 s by default. */
  readonly pollIntervalMs?: number;
  /**
   * How often while a new sandbox is pending (placed, its container not yet running for the first time):
   * a create waits on that `ready`, and the Engine API has no task events to wait on instead; 100 ms by
   * default. A sandbox placed again after a loss is read at the idle interval.
   */
  readonly pendingPollIntervalMs?: number;
  /** Failed polls while watching (each is retried at the next interval). */
  readonly onError?: (error: unknown) => void;
  /** Sandbox services kept placed ahead of time across the cluster (warm.ts); none by default. */
  readonly warmPool?: { readonly size: number; readonly shape: WarmShape };
}

const MANAGED = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;

/** Swarm refuses a constraint on a label key with other characters (a `/`, say) only at placement. */
const CONSTRAINT_LABEL = /^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/;

export class SwarmOrchestrator implements Orchestrator {
  readonly warm: SwarmWarmPool | undefined;

  constructor(private readonly options: SwarmOrchestratorOptions) {
    const { nodeLabel } = options.nodeAgent;
    if (nodeLabel !== undefined && !CONSTRAINT_LABEL.test(nodeLabel)) {
      throw new OrchestratorError('invalid-request', `not a node label Swarm can constrain on: ${nodeLabel}`);
    }
    const warm = options.warmPool;
    this.warm =
      warm === undefined || warm.size <= 0
        ? undefined
        : new SwarmWarmPool({
            api: options.api,
            place: (r) => this.place(r),
            size: warm.size,
            shape: warm.shape,
          });
  }

  async place(request: PlacementRequest): Promise<void> {
    const { nodeLabel } = this.options.nodeAgent;
    const constraints = [
      ...(nodeLabel === undefined ? [] : [`node.labels.${nodeLabel}==true`]),
      ...(this.options.constraints ?? []),
    ];
    const spec = buildServiceSpec(request, {
      constraints,
      restartDelayMs: this.options.restartDelayMs ?? 1000,
      pidsLimit: this.options.pidsLimit ?? 1024,
    });
    await this.options.api.createService(spec);
  }

  async remove(sandboxId: string): Promise<void> {
    await this.options.api.removeService(serviceName(sandboxId));
  }

  async locate(sandboxId: string): Promise<Location | undefined> {
    const { api, nodeAgent } = this.options;
    const name = serviceName(sandboxId);
    const service = await api.inspectService(name);
    if (service === undefined || sandboxIdOfService(service) !== sandboxId) return undefined;
    const [tasks, nodes] = await Promise.all([api.listTasks({ service: [service.ID] }), api.listNodes()]);
    const byId = new Map(nodes.map((n) => [n.ID, n]));
    const task = servingTask(
      tasks.filter((t) => t.ServiceID === service.ID),
      byId,
    );
    if (task === undefined) return undefined;
    const node = byId.get(task.NodeID!)!;
    const where = nodeName(node, node.ID)!;
    const address = node.Status.Addr;
    const labelled = nodeAgent.nodeLabel === undefined || node.Spec?.Labels?.[nodeAgent.nodeLabel] === 'true';
    if (!labelled || address === undefined || address === '' || address === '0.0.0.0') {
      throw new OrchestratorError('no-node-agent', `no node agent on ${where}`, {
        details: { nodeName: where },
      });
    }
    return {
      sandboxId,
      nodeName: where,
      podIP: taskAddress(task),
      nodeAgent: { host: address, port: nodeAgent.port },
    };
  }

  /**
   * The sandboxes this adapter placed that `owned` does not know: services left behind by an API tier
   * that lost its record (a crash between `place` and storing it). The caller removes them.
   */
  async findUnowned(owned: (sandboxId: string) => boolean): Promise<string[]> {
    const services = await this.options.api.listServices(MANAGED);
    return services.flatMap((s) => {
      const id = sandboxIdOfService(s);
      // An idle warm placement belongs to the pool; a claimed one goes by its placement id.
      if (s.Spec.Labels?.[WARM_LABEL] === 'unclaimed') return [];
      return id === undefined || owned(id) ? [] : [id];
    });
  }

  watch(options: WatchOptions = {}): AsyncGenerator<PlacementStatus> {
    return runWatch<PlacementStatus>(options.signal, (signal, queue) => this.poll(signal, queue));
  }

  private async poll(signal: AbortSignal, queue: StatusQueue<PlacementStatus>): Promise<void> {
    const { api } = this.options;
    const trackers = new Map<string, SwarmTracker>();
    while (!signal.aborted) {
      try {
        const [services, tasks, nodes] = await Promise.all([
          api.listServices(MANAGED),
          api.listTasks(),
          api.listNodes(),
        ]);
        if (!signal.aborted) queue.push(...round(trackers, services, tasks, nodes));
      } catch (error) {
        this.options.onError?.(error);
      }
      const pending = [...trackers.values()].some((t) => t.awaitingFirstReady);
      const interval = pending
        ? (this.options.pendingPollIntervalMs ?? 100)
        : (this.options.pollIntervalMs ?? 1000);
      await sleep(interval, undefined, { signal }).catch(() => undefined);
    }
  }
}

/** One poll: every service's tracker brought up to date; trackers of services no longer listed end. */
function round(
  trackers: Map<string, SwarmTracker>,
  services: readonly SwarmService[],
  tasks: readonly SwarmTask[],
  nodes: readonly SwarmNode[],
): PlacementStatus[] {
  const out: PlacementStatus[] = [];
  const byNode = new Map(nodes.map((n) => [n.ID, n]));
  const byService = new Map<string, SwarmTask[]>();
  for (const task of tasks) {
    const list = byService.get(task.ServiceID) ?? [];
    list.push(task);
    byService.set(task.ServiceID, list);
  }
  const seen = new Set<string>();
  for (const service of services) {
    const id = sandboxIdOfService(service);
    if (id === undefined) continue;
    seen.add(id);
    let tracker = trackers.get(id);
    if (tracker === undefined) trackers.set(id, (tracker = new SwarmTracker(id)));
    out.push(...tracker.update(byService.get(service.ID) ?? [], byNode));
  }
  for (const [id, tracker] of [...trackers]) {
    if (seen.has(id)) continue;
    trackers.delete(id);
    out.push(...tracker.update(undefined, byNode));
  }
  return out;
}
