// Locating a sandbox on recorded Swarm state: the node of its running task and that node's agent, no
// agent on a node without the operator's label, nothing while pending or removed; and the returning-node
// and unowned-service clean-ups on the same answers.
import { afterEach, describe, expect, it } from 'vitest';
import { OrchestratorError, findLeftovers } from '../src/index.js';
import type { SwarmService } from '../src/swarm/index.js';
import {
  SANDBOX_A,
  SANDBOX_C,
  SANDBOX_D,
  SANDBOX_E,
  recorded,
  swarmFixture,
  swarmReplay,
  type EngineExchange,
  type EngineReplay,
} from './swarm-replay.js';

let replay: EngineReplay | undefined;
afterEach(async () => {
  await replay?.close();
  replay = undefined;
});

function service(name: string): SwarmService {
  return swarmFixture<SwarmService[]>('services-a-c-d-e.json').find((s) => s.Spec.Name === name)!;
}

function lookup(name: string, tasks: string, nodes: string): EngineExchange[] {
  return [
    { method: 'GET', path: `/services/${name}`, body: service(name) },
    { method: 'GET', path: '/tasks', body: swarmFixture(tasks) },
    { method: 'GET', path: '/nodes', body: swarmFixture(nodes) },
  ];
}

const NAME_A = 'sb-3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c';
const NAME_D = 'sb-00000000-0000-4000-8000-00000000000d';

describe('locate', () => {
  it('returns the node of the running task and the node agent at that node address', async () => {
    const r = await swarmReplay(lookup(NAME_A, 'tasks-a-running.json', 'nodes-ready.json'));
    replay = r.replay;
    expect(await r.adapter.locate(SANDBOX_A)).toEqual({
      sandboxId: SANDBOX_A,
      nodeName: 'swarm-1',
      podIP: '',
      nodeAgent: { host: '10.231.0.1', port: 7300 },
    });
    const tasks = r.replay.requests.find((q) => q.path === '/tasks')!;
    expect(JSON.parse(tasks.query['filters']!)).toEqual({ service: [service(NAME_A).ID] });
  });

  it('refuses a node that does not carry the node agent label', async () => {
    const r = await swarmReplay(lookup(NAME_A, 'tasks-a-restarted.json', 'nodes-swarm-2-no-agent.json'));
    replay = r.replay;
    const error = await r.adapter.locate(SANDBOX_A).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OrchestratorError);
    expect(error).toMatchObject({ reason: 'no-node-agent', code: 'AF_UNAVAILABLE' });
    expect((error as OrchestratorError).details).toMatchObject({ nodeName: 'swarm-2' });
  });

  it('returns nothing while the task is pending, and for a sandbox with no service', async () => {
    const r = await swarmReplay([
      ...lookup(NAME_A, 'tasks-a-pending.json', 'nodes-ready.json'),
      recorded('GET', `/services/${NAME_D}`, 'error-service-not-found.json'),
    ]);
    replay = r.replay;
    expect(await r.adapter.locate(SANDBOX_A)).toBeUndefined();
    expect(await r.adapter.locate(SANDBOX_D)).toBeUndefined();
  });

  it('tells a returning node that the sandbox Swarm placed elsewhere is a leftover', async () => {
    const r = await swarmReplay(lookup(NAME_D, 'tasks-d-swarm-3-down.json', 'nodes-swarm-3-down.json'));
    replay = r.replay;
    expect(await findLeftovers(r.adapter, 'swarm-3', [SANDBOX_D])).toEqual([SANDBOX_D]);
  });
});

describe('findUnowned', () => {
  it('lists the adapter services whose sandbox no record owns', async () => {
    const r = await swarmReplay([
      { method: 'GET', path: '/services', body: swarmFixture('services-a-c-d-e.json') },
    ]);
    replay = r.replay;
    const owned = new Set([SANDBOX_A, SANDBOX_C]);
    expect((await r.adapter.findUnowned((id) => owned.has(id))).sort()).toEqual([SANDBOX_D, SANDBOX_E]);
  });
});
