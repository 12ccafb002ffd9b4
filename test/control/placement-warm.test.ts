// Starting placed sandboxes from the orchestrator's warm pool, with a stand-in orchestrator and node
// agent: a start claims an idle placement (attached, routed and removed under the placement's id, its
// sandbox's answers under the sandbox's), a claimed placement is never offered again, a start that finds
// none fitting places afresh, of two replicas racing for one placement exactly one gets it, and a claim
// whose replica died before finishing it has its placement removed once it is past the bound.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import type { WarmPool } from '@agentfense/orchestrator';
import { SwarmOrchestrator } from '@agentfense/orchestrator/swarm';
import {
  STALE_CLAIM_MS,
  claimWarm,
  retireUnfinishedClaims,
} from '../../packages/control/src/placement/warm.js';
import { openMetadataStore } from '../../packages/control/src/store/metadata.js';
import { newId } from '../../packages/control/src/ids.js';
import {
  fakeOrchestrator,
  startFakeNodeAgent,
  type FakeNodeAgent,
  type FakeOrchestrator,
} from '../helpers/placement-fakes.js';
import { SwarmManagerInMemory } from '../../packages/orchestrator/test/swarm-memory.js';

const TOKEN = randomBytes(24).toString('hex');
const RESOURCES = { memoryBytes: 512 * 2 ** 20, cpuQuota: 50_000 };
const SWARM_SHAPE = {
  image: 'agentfense/sandbox:test',
  resources: { cpuMillis: 500, memoryBytes: 512 * 2 ** 20 },
};

/** A warm pool over the fake orchestrator: `idle` placements it placed, each offered until claimed. */
function fakeWarm(orchestrator: FakeOrchestrator): WarmPool & { idleIds: string[]; refills: number } {
  const warm = {
    idleIds: [] as string[],
    refills: 0,
    idle: (shape: { resources: { memoryBytes: number } }) =>
      Promise.resolve(shape.resources.memoryBytes === RESOURCES.memoryBytes ? [...warm.idleIds] : []),
    // No check of its own here: what stops a second claim is the database's.
    markClaimed: (id: string) => {
      warm.idleIds = warm.idleIds.filter((i) => i !== id);
      return Promise.resolve(true);
    },
    unclaimed: () => Promise.resolve([...warm.idleIds]),
    retire: (id: string) => {
      const idle = warm.idleIds.includes(id);
      warm.idleIds = warm.idleIds.filter((i) => i !== id);
      return Promise.resolve(idle);
    },
    refill: async () => {
      warm.refills++;
      while (warm.idleIds.length < 1) {
        const id = newId('sandbox');
        await orchestrator.place({
          sandboxId: id,
          image: 'sandbox:test',
          resources: { cpuMillis: 500, memoryBytes: RESOURCES.memoryBytes },
        });
        warm.idleIds.push(id);
      }
    },
  };
  return warm;
}

describe('starting placed sandboxes from a warm pool', () => {
  let dir: string;
  let agent: FakeNodeAgent;
  let orchestrator: FakeOrchestrator & { warm: ReturnType<typeof fakeWarm> };
  let plane: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'af-placement-warm-'));
    agent = await startFakeNodeAgent();
    const base = fakeOrchestrator(agent.port);
    orchestrator = Object.assign(base, { warm: fakeWarm(base) });
    await orchestrator.warm.refill();
    plane = await ControlPlane.open({
      dataDir: join(dir, 'data'),
      workerPoolSize: 0,
      placement: { orchestrator, nodeAgentToken: TOKEN, image: 'sandbox:test', readyTimeoutMs: 2000 },
    });
    codebaseId = (await plane.createCodebase({ name: 'app' })).id;
  });

  afterAll(async () => {
    await plane.close();
    await agent.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('claims an idle placement, routes to it under its id, and removes it with the sandbox', async () => {
    const placement = orchestrator.warm.idleIds[0]!;
    const sb = await plane.createSandbox({ codebaseId, resources: RESOURCES });
    agent.seen.length = 0;
    const started = await plane.startSandbox(sb.id);
    expect(started.stateReason).toBe('placed on node n1 (from the warm pool)');
    // Nothing new placed for it: the node agent attached the view in the warm container.
    expect(orchestrator.placed.has(sb.id)).toBe(false);
    const attach = agent.seen.find((s) => s.method === 'POST' && s.url === '/v1/sandboxes')!;
    expect(JSON.parse(attach.body)).toMatchObject({ sandboxId: placement });
    expect((await plane.run(sb.id, 'echo hi')).exitCode).toBe(0);
    expect(agent.seen.at(-1)!.url).toBe(`/v1/sandboxes/${placement}/exec`);
    // Never offered again; the pool was refilled behind it.
    expect(orchestrator.warm.idleIds).not.toContain(placement);
    await plane.destroySandbox(sb.id);
    expect(orchestrator.placed.has(placement)).toBe(false);
    expect(
      agent.seen.some((s) => s.method === 'DELETE' && s.url.startsWith(`/v1/sandboxes/${placement}`)),
    ).toBe(true);
  });

  it('places afresh when no idle placement fits', async () => {
    const sb = await plane.createSandbox({ codebaseId, resources: { memoryBytes: 2 ** 30 } });
    const started = await plane.startSandbox(sb.id);
    expect(started.stateReason).toBe('placed on node n1');
    expect(orchestrator.placed.has(sb.id)).toBe(true);
    await plane.destroySandbox(sb.id);
  });

  it('of two replicas claiming the same placement at once exactly one gets it', async () => {
    const file = join(dir, 'race.db');
    const [a, b] = [
      await openMetadataStore({ sqliteFile: file }),
      await openMetadataStore({ sqliteFile: file }),
    ];
    try {
      const warm = fakeWarm(orchestrator);
      warm.idleIds.push(newId('sandbox'));
      const only = [...warm.idleIds];
      // Both read the same idle list before either claims.
      warm.idle = () => Promise.resolve(only);
      const logger = { warn: () => undefined };
      const shape = {
        image: 'sandbox:test',
        resources: { cpuMillis: 500, memoryBytes: RESOURCES.memoryBytes },
      };
      const got = await Promise.all([
        claimWarm({ warm, claims: a.warmClaims, logger }, newId('sandbox'), shape),
        claimWarm({ warm, claims: b.warmClaims, logger }, newId('sandbox'), shape),
      ]);
      expect(got.filter((g) => g !== undefined)).toEqual(only);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('removes an idle placement whose claim never finished, and never hands it out', async () => {
    const manager = new SwarmManagerInMemory();
    const swarm = new SwarmOrchestrator({
      api: manager.api,
      nodeAgent: { port: 7300, nodeLabel: 'agentfense.node-agent' },
      warmPool: { size: 1, shape: SWARM_SHAPE },
    });
    const warm = swarm.warm!;
    const store = await openMetadataStore({ sqliteFile: join(dir, 'unfinished.db') });
    try {
      const claims = store.warmClaims;
      await warm.refill();
      const [name] = [...manager.services.keys()];
      manager.run(name!);
      const [placement] = await warm.idle(SWARM_SHAPE);
      // A replica claimed it in the database and died before marking it claimed on the manager.
      const at = Date.UTC(2026, 0, 1);
      expect(await claims.claim({ placementId: placement!, sandboxId: newId('sandbox'), at })).toBe(true);
      // Offered as idle, but no other replica gets it: the claim row stands.
      const logger = { warn: () => undefined };
      expect(await claimWarm({ warm, claims, logger }, newId('sandbox'), SWARM_SHAPE)).toBeUndefined();

      // Within the bound its replica may still be finishing: kept.
      expect(await retireUnfinishedClaims({ warm, claims, now: at + STALE_CLAIM_MS - 1 })).toEqual([]);
      expect(manager.services.has(name!)).toBe(true);
      // Past it: removed, its claim released, and the pool back to its size with another placement.
      expect(await retireUnfinishedClaims({ warm, claims, now: at + STALE_CLAIM_MS })).toEqual([placement]);
      expect(manager.services.has(name!)).toBe(false);
      expect(await claims.sandboxOf(placement!)).toBeUndefined();
      await warm.refill();
      expect(await warm.unclaimed()).toHaveLength(1);
      expect(await warm.unclaimed()).not.toContain(placement);
      // The replica was only slow: its marking now fails, so its start takes another or places afresh.
      expect(await warm.markClaimed(placement!, newId('sandbox'))).toBe(false);

      // A claim that finished is never removed, however old.
      const [next] = [...manager.services.keys()].filter((n) => n !== name);
      manager.run(next!);
      const sandbox = newId('sandbox');
      const claimed = await claimWarm({ warm, claims, logger }, sandbox, SWARM_SHAPE);
      expect(claimed).toBeDefined();
      expect(await retireUnfinishedClaims({ warm, claims, now: Date.now() + 10 * STALE_CLAIM_MS })).toEqual(
        [],
      );
      expect(manager.services.has(next!)).toBe(true);
      expect(await claims.placementOf(sandbox)).toBe(claimed);
    } finally {
      await store.close();
    }
  });
});
