// A Swarm manager in memory that keeps versions as Swarm does (an update names the version it read; one
// made meanwhile refuses it), for the warm pool's tests here and the API tier's (test/control).
import type { SwarmApi, SwarmNode, SwarmService, SwarmServiceSpec, SwarmTask } from '../src/swarm/index.js';

const NODE: SwarmNode = {
  ID: 'n1',
  Spec: { Labels: { 'agentfense.node-agent': 'true' } },
  Description: { Hostname: 'swarm-1' },
  Status: { State: 'ready', Addr: '10.0.0.1' },
};

/** A manager in memory: services with versions, one running task per service once `run` says so. */
export class SwarmManagerInMemory {
  readonly services = new Map<string, SwarmService>();
  readonly tasks: SwarmTask[] = [];
  #next = 1;

  run(name: string): void {
    const s = this.services.get(name)!;
    this.tasks.push({
      ID: `t-${s.ID}`,
      ServiceID: s.ID,
      NodeID: 'n1',
      DesiredState: 'running',
      Status: { State: 'running' },
    });
  }

  readonly api: SwarmApi = {
    createService: (spec: SwarmServiceSpec) => {
      const id = `svc-${this.#next++}`;
      const service = {
        ID: id,
        Version: { Index: this.#next++ },
        // Later services, later times (ISO strings sort as the manager's do).
        CreatedAt: new Date(Date.UTC(2026, 0, 1) + this.#next * 1000).toISOString(),
        Spec: structuredClone(spec),
      };
      this.services.set(spec.Name, service);
      return Promise.resolve(id);
    },
    removeService: (name) => Promise.resolve(this.services.delete(name)),
    inspectService: (name) => Promise.resolve(structuredClone(this.services.get(name))),
    // The label filter ignored: the widest answer a manager (or a proxy) could give.
    listServices: () => Promise.resolve([...this.services.values()].map((s) => structuredClone(s))),
    listTasks: () => Promise.resolve([...this.tasks]),
    listNodes: () => Promise.resolve([NODE]),
    relabelService: async (service, labels) => {
      await Promise.resolve();
      const now = this.services.get(service.Spec.Name);
      if (now === undefined || now.Version?.Index !== service.Version?.Index) return false;
      this.services.set(service.Spec.Name, {
        ...now,
        Version: { Index: this.#next++ },
        Spec: { ...now.Spec, Labels: { ...labels } },
      });
      return true;
    },
  };
}
