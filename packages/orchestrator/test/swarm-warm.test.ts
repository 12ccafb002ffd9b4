// The Swarm warm pool against an in-memory manager that keeps versions as Swarm does (an update names
// the version it read; one made meanwhile refuses it): refill places idle services of the pool's shape,
// only running ones of the adapter's are offered, a claimed one is never offered again, of two replicas
// marking the same one claimed at once exactly one succeeds, idle ones beyond the size are removed
// (newest first, never one a claim got), and a retirement racing a claim leaves exactly one of them done.
import { describe, expect, it } from 'vitest';
import { SwarmOrchestrator, WARM_LABEL } from '../src/swarm/index.js';
import { SwarmManagerInMemory as Manager } from './swarm-memory.js';

const SHAPE = { image: 'agentfense/sandbox:test', resources: { cpuMillis: 500, memoryBytes: 512 * 2 ** 20 } };
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

  it('removes idle services beyond its size, newest first, after two replicas topped up at once', async () => {
    const manager = new Manager();
    const [a, b] = [adapterOn(manager, 2), adapterOn(manager, 2)];
    // Both read "none idle" and placed two each.
    await Promise.all([a.warm!.refill(), b.warm!.refill()]);
    expect(manager.services.size).toBe(4);
    const oldest = [...manager.services.keys()].slice(0, 2);
    await a.warm!.refill();
    expect([...manager.services.keys()]).toEqual(oldest);
    // A replica started with a smaller size keeps that many.
    await adapterOn(manager, 1).warm!.refill();
    expect([...manager.services.keys()]).toEqual([oldest[0]]);
  });

  it('never removes a claimed service to get back to its size', async () => {
    const manager = new Manager();
    const [a, b] = [adapterOn(manager, 1), adapterOn(manager, 1)];
    await Promise.all([a.warm!.refill(), b.warm!.refill()]);
    const [oldest, newest] = [...manager.services.keys()];
    // The newest, the one an overshoot removes first, is claimed.
    const placement = manager.services.get(newest!)!.Spec.Labels?.['agentfense.dev/sandbox-id'];
    expect(await a.warm!.markClaimed(placement!, 'sb_00000000-0000-4000-8000-00000000000a')).toBe(true);
    await b.warm!.refill();
    expect([...manager.services.keys()]).toEqual([oldest, newest]);
    expect(manager.services.get(newest!)?.Spec.Labels?.[WARM_LABEL]).toBe('claimed');
    expect(await a.warm!.retire(placement!)).toBe(false);
    expect(manager.services.has(newest!)).toBe(true);
  });

  it('of a retirement and a claim of one service at once exactly one happens', async () => {
    const manager = new Manager();
    const warm = adapterOn(manager, 1).warm!;
    await warm.refill();
    const [name] = [...manager.services.keys()];
    manager.run(name!);
    const [placement] = await warm.idle(SHAPE);
    const [retired, claimed] = await Promise.all([
      warm.retire(placement!),
      warm.markClaimed(placement!, 'sb_00000000-0000-4000-8000-00000000000a'),
    ]);
    expect([retired, claimed].filter(Boolean)).toHaveLength(1);
    // Retired: gone; claimed: kept, labelled claimed.
    expect(manager.services.has(name!)).toBe(claimed);
    expect(await warm.idle(SHAPE)).toEqual([]);
  });

  it('removes a service a replica retired but died before removing, and lists every idle one', async () => {
    const manager = new Manager();
    const warm = adapterOn(manager, 2).warm!;
    await warm.refill();
    const [first, second] = [...manager.services.values()];
    expect((await warm.unclaimed()).sort()).toEqual(
      [first, second].map((s) => s!.Spec.Labels?.['agentfense.dev/sandbox-id']).sort(),
    );
    // Retired at the version read, then the replica went: not idle, and removed by the next refill.
    await manager.api.relabelService(first!, { ...first!.Spec.Labels, [WARM_LABEL]: 'retired' });
    expect(await warm.unclaimed()).toEqual([second!.Spec.Labels?.['agentfense.dev/sandbox-id']]);
    await warm.refill();
    expect(manager.services.has(first!.Spec.Name)).toBe(false);
    expect(manager.services.size).toBe(2);
  });
});
