// The Swarm warm pool against an in-memory manager that keeps versions as Swarm does (an update names
// the version it read; one made meanwhile refuses it): refill places idle services of the pool's shape,
// only running ones of the adapter's are offered, a claimed one is never offered again, and of two
// replicas marking the same one claimed at once exactly one succeeds.
import { describe, expect, it } from 'vitest';
import {
  SwarmOrchestrator,
  WARM_LABEL,
  type SwarmApi,
  type SwarmNode,
  type SwarmService,
  type SwarmServiceSpec,
  type SwarmTask,
} from '../src/swarm/index.js';

const SHAPE = { image: 'agentfense/sandbox:test', resources: { cpuMillis: 500, memoryBytes: 512 * 2 ** 20 } };
const NODE: SwarmNode = {
  ID: 'n1',
  Spec: { Labels: { 'agentfense.node-agent': 'true' } },
  Description: { Hostname: 'swarm-1' },
  Status: { State: 'ready', Addr: '10.0.0.1' },
};

/** A manager in memory: services with versions, one running task per service once `run` says so. */
class Manager {
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
        CreatedAt: `${this.#next}`,
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

function adapterOn(manager: Manager, size = 2): SwarmOrchestrator {
  return new SwarmOrchestrator({
    api: manager.api,
    nodeAgent: { port: 7300, nodeLabel: 'agentfense.node-agent' },
    warmPool: { size, shape: SHAPE },
  });
}

describe('Swarm warm pool', () => {
  it('refills to its size with services of its shape, and offers only those running', async () => {
    const manager = new Manager();
    const warm = adapterOn(manager).warm!;
    await warm.refill();
    await warm.refill();
    const services = [...manager.services.values()];
    expect(services).toHaveLength(2);
    for (const s of services) expect(s.Spec.Labels?.[WARM_LABEL]).toBe('unclaimed');
    expect(await warm.idle(SHAPE)).toEqual([]);
    manager.run(services[0]!.Spec.Name);
    const ids = await warm.idle(SHAPE);
    expect(ids).toEqual([services[0]!.Spec.Labels?.['agentfense.dev/sandbox-id']]);
    // Another shape (a sandbox asking for more memory) gets none of them.
    expect(await warm.idle({ ...SHAPE, resources: { ...SHAPE.resources, memoryBytes: 2 ** 30 } })).toEqual(
      [],
    );
  });

  it('of two replicas marking one claimed at once exactly one succeeds, and it is never offered again', async () => {
    const manager = new Manager();
    const [a, b] = [adapterOn(manager, 1), adapterOn(manager, 1)];
    await a.warm!.refill();
    const name = [...manager.services.keys()][0]!;
    manager.run(name);
    const [placement] = await b.warm!.idle(SHAPE);
    const marked = await Promise.all([
      a.warm!.markClaimed(placement!, 'sb_00000000-0000-4000-8000-00000000000a'),
      b.warm!.markClaimed(placement!, 'sb_00000000-0000-4000-8000-00000000000b'),
    ]);
    expect(marked.filter(Boolean)).toHaveLength(1);
    expect(manager.services.get(name)!.Spec.Labels?.[WARM_LABEL]).toBe('claimed');
    expect(await a.warm!.idle(SHAPE)).toEqual([]);
    expect(await b.warm!.markClaimed(placement!, 'sb_00000000-0000-4000-8000-00000000000c')).toBe(false);
    // The claimed one does not count: the pool places another.
    await b.warm!.refill();
    expect(manager.services.size).toBe(2);
  });

  it("offers no service that only claims to be idle: not the adapter's, or named for another id", async () => {
    const manager = new Manager();
    const warm = adapterOn(manager).warm!;
    const forged = (name: string, labels: Record<string, string>): void => {
      manager.services.set(name, {
        ID: `forged-${name}`,
        Version: { Index: 1 },
        Spec: {
          Name: name,
          Labels: labels,
          TaskTemplate: {
            ContainerSpec: { Image: SHAPE.image },
            Resources: { Reservations: { NanoCPUs: 500_000_000, MemoryBytes: 512 * 2 ** 20 } },
          },
        },
      });
      manager.run(name);
    };
    forged('web', { [WARM_LABEL]: 'unclaimed' });
    forged('sb-00000000-0000-4000-8000-0000000000ff', {
      [WARM_LABEL]: 'unclaimed',
      'agentfense.dev/managed-by': 'agentfense',
      'agentfense.dev/sandbox-id': 'sb_00000000-0000-4000-8000-0000000000ee',
    });
    expect(await warm.idle(SHAPE)).toEqual([]);
  });
});
