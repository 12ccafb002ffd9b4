// The status stream over recorded polls of a real Swarm: a service going from pending to running, its
// container killed and started again on another node, a node whose dockerd died and its sandbox placed
// again elsewhere, an image no node has, a failed poll, and a removed service.
import { afterEach, describe, expect, it } from 'vitest';
import type { PlacementStatus } from '../src/index.js';
import type { SwarmOrchestrator, SwarmService } from '../src/swarm/index.js';
import {
  SANDBOX_A,
  SANDBOX_B,
  SANDBOX_D,
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

/** The recorded service list, cut to the services of `ids` (the recording Swarm ran others beside). */
function services(file: string, ...names: string[]): SwarmService[] {
  return swarmFixture<SwarmService[]>(file).filter((s) => names.includes(s.Spec.Name));
}

/** One poll: the adapter's services, every task, every node. */
function poll(serviceList: SwarmService[], tasks: string, nodes: string): EngineExchange[] {
  return [
    { method: 'GET', path: '/services', body: serviceList },
    { method: 'GET', path: '/tasks', body: swarmFixture(tasks) },
    { method: 'GET', path: '/nodes', body: swarmFixture(nodes) },
  ];
}

async function statuses(adapter: SwarmOrchestrator, count: number): Promise<PlacementStatus[]> {
  const seen: PlacementStatus[] = [];
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 5000);
  for await (const status of adapter.watch({ signal: controller.signal })) {
    seen.push(status);
    if (seen.length === count) break;
  }
  clearTimeout(timer);
  return seen;
}

const A = services('services-a-b.json', 'sb-3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c');
const B = services('services-a-b.json', 'sb-00000000-0000-4000-8000-00000000000b');
const D = services('services-a-c-d-e.json', 'sb-00000000-0000-4000-8000-00000000000d');
const WHAT_WENT =
  'its processes and sessions there ended, and changes since its last checkpoint stayed there';

describe('watch', () => {
  it('follows a service from pending to running, through its container dying, to gone', async () => {
    const r = await swarmReplay([
      ...poll(A, 'tasks-a-pending.json', 'nodes-ready.json'),
      ...poll(A, 'tasks-a-running.json', 'nodes-ready.json'),
      ...poll(A, 'tasks-a-container-killed.json', 'nodes-ready.json'),
      ...poll(A, 'tasks-a-restarted.json', 'nodes-ready.json'),
      ...poll([], 'tasks-a-restarted.json', 'nodes-ready.json'),
    ]);
    replay = r.replay;
    expect(await statuses(r.adapter, 6)).toEqual([
      { state: 'pending', sandboxId: SANDBOX_A, detail: 'pending: pending task scheduling' },
      { state: 'ready', sandboxId: SANDBOX_A, nodeName: 'swarm-1', podIP: '' },
      {
        state: 'lost',
        sandboxId: SANDBOX_A,
        reason: 'container-lost',
        nodeName: 'swarm-1',
        detail: `its container on node swarm-1 stopped (failed: task: non-zero exit (137)); ${WHAT_WENT}`,
        replaced: true,
      },
      { state: 'pending', sandboxId: SANDBOX_A, detail: 'ready: prepared' },
      { state: 'ready', sandboxId: SANDBOX_A, nodeName: 'swarm-2', podIP: '' },
      { state: 'gone', sandboxId: SANDBOX_A },
    ]);
    expect(r.replay.unused).toEqual([]);
    const listed = r.replay.requests.find((q) => q.path === '/services')!;
    expect(JSON.parse(listed.query['filters']!)).toEqual({ label: ['agentfense.dev/managed-by=agentfense'] });
  });

  it('reads again at the pending interval while a sandbox is pending, not the idle one', async () => {
    // A create waits on this `ready`: with the idle interval at a minute, only the pending one brings it.
    const r = await swarmReplay(
      [
        ...poll(A, 'tasks-a-pending.json', 'nodes-ready.json'),
        ...poll(A, 'tasks-a-running.json', 'nodes-ready.json'),
      ],
      { pollIntervalMs: 60_000, pendingPollIntervalMs: 5 },
    );
    replay = r.replay;
    expect(await statuses(r.adapter, 2)).toEqual([
      { state: 'pending', sandboxId: SANDBOX_A, detail: 'pending: pending task scheduling' },
      { state: 'ready', sandboxId: SANDBOX_A, nodeName: 'swarm-1', podIP: '' },
    ]);
  });

  it('reads a sandbox pending again after a loss at the idle interval: a lost node does not speed the polls', async () => {
    const r = await swarmReplay(
      [
        ...poll(D, 'tasks-d-on-swarm-3.json', 'nodes-ready.json'),
        ...poll(D, 'tasks-d-on-swarm-3.json', 'nodes-swarm-3-down.json'),
        ...poll(D, 'tasks-d-swarm-3-down.json', 'nodes-swarm-3-down.json'),
      ],
      { pollIntervalMs: 1000, pendingPollIntervalMs: 5 },
    );
    replay = r.replay;
    const seen: PlacementStatus[] = [];
    const controller = new AbortController();
    // Polls at 0 and 1 s bring ready, then lost and pending; the third is due at 2 s, not at 1.005 s.
    const timer = setTimeout(() => controller.abort(), 1600);
    for await (const status of r.adapter.watch({ signal: controller.signal })) seen.push(status);
    clearTimeout(timer);
    expect(seen.map((s) => s.state)).toEqual(['ready', 'lost', 'pending']);
  });

  it('reports a sandbox whose node died as node-lost, then ready where Swarm placed it again', async () => {
    const r = await swarmReplay([
      ...poll(D, 'tasks-d-on-swarm-3.json', 'nodes-ready.json'),
      ...poll(D, 'tasks-d-swarm-3-down.json', 'nodes-swarm-3-down.json'),
    ]);
    replay = r.replay;
    expect(await statuses(r.adapter, 3)).toEqual([
      { state: 'ready', sandboxId: SANDBOX_D, nodeName: 'swarm-3', podIP: '' },
      {
        state: 'lost',
        sandboxId: SANDBOX_D,
        reason: 'node-lost',
        nodeName: 'swarm-3',
        detail: `node swarm-3 went away (running: started); ${WHAT_WENT}`,
        replaced: true,
      },
      { state: 'ready', sandboxId: SANDBOX_D, nodeName: 'swarm-2', podIP: '' },
    ]);
  });

  it('reports a node that stopped answering before Swarm replaced the task as node-lost, then pending', async () => {
    const r = await swarmReplay([
      ...poll(D, 'tasks-d-on-swarm-3.json', 'nodes-ready.json'),
      ...poll(D, 'tasks-d-on-swarm-3.json', 'nodes-swarm-3-down.json'),
    ]);
    replay = r.replay;
    const seen = await statuses(r.adapter, 3);
    expect(seen.slice(1)).toEqual([
      expect.objectContaining({ state: 'lost', reason: 'node-lost', nodeName: 'swarm-3', replaced: true }),
      {
        state: 'pending',
        sandboxId: SANDBOX_D,
        detail: 'node swarm-3 is down; waiting for Swarm to place it again',
      },
    ]);
  });

  it('reports an image no node has as pending with the engine message (Swarm keeps trying)', async () => {
    const r = await swarmReplay(poll(B, 'tasks-b-no-image.json', 'nodes-ready.json'));
    replay = r.replay;
    expect(await statuses(r.adapter, 1)).toEqual([
      { state: 'pending', sandboxId: SANDBOX_B, detail: 'rejected: No such image: afswarm/missing:1' },
    ]);
  });

  it('reports failed, not replaced, once no task of the service is meant to run', async () => {
    // The recorded killed container without its replacement: what Swarm lists once a restart policy
    // with an attempt limit has run out (the adapter's own policy has none).
    const ended = swarmFixture<{ DesiredState: string; ServiceID: string }[]>(
      'tasks-a-container-killed.json',
    ).filter((t) => t.ServiceID === A[0]!.ID && t.DesiredState === 'shutdown');
    const r = await swarmReplay([
      { method: 'GET', path: '/services', body: A },
      { method: 'GET', path: '/tasks', body: ended },
      { method: 'GET', path: '/nodes', body: swarmFixture('nodes-ready.json') },
    ]);
    replay = r.replay;
    expect(await statuses(r.adapter, 1)).toEqual([
      {
        state: 'lost',
        sandboxId: SANDBOX_A,
        reason: 'failed',
        nodeName: 'swarm-1',
        detail: 'failed: task: non-zero exit (137)',
        replaced: false,
      },
    ]);
  });

  it('passes a failed poll to onError and goes on polling', async () => {
    const r = await swarmReplay([
      { method: 'GET', path: '/services', body: A },
      { method: 'GET', path: '/tasks', body: swarmFixture('tasks-a-running.json') },
      recorded('GET', '/nodes', 'error-not-manager.json'),
      ...poll(A, 'tasks-a-running.json', 'nodes-ready.json'),
    ]);
    replay = r.replay;
    expect(await statuses(r.adapter, 1)).toEqual([
      { state: 'ready', sandboxId: SANDBOX_A, nodeName: 'swarm-1', podIP: '' },
    ]);
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatchObject({ reason: 'unavailable', code: 'AF_UNAVAILABLE' });
  });
});
