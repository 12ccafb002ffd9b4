// The status stream against recorded watch streams: a claim becoming ready, a watch whose
// resourceVersion expired (410, re-listed), a node lost and the pod placed again on another node, a
// claim agent-sandbox will not serve, and deletion.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { PlacementStatus } from '../src/index.js';
import type { KubernetesOrchestrator } from '../src/kubernetes/index.js';
import { fixture, type Exchange, type ReplayServer } from './replay.js';
import { CLAIMS_PATH, PODS_PATH, SANDBOX, replayAdapter } from './setup.js';

let server: ReplayServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Reads the stream until `until` holds for a status, then stops the watch. */
async function statuses(
  adapter: KubernetesOrchestrator,
  until: (s: PlacementStatus) => boolean,
): Promise<PlacementStatus[]> {
  const seen: PlacementStatus[] = [];
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 5000);
  for await (const status of adapter.watch({ signal: controller.signal })) {
    seen.push(status);
    if (until(status)) break;
  }
  clearTimeout(timer);
  return seen;
}

const list = (path: string, name: string): Exchange => ({ method: 'GET', path, body: fixture(name) });
const watch = (path: string, name: string, hold = true): Exchange => ({
  method: 'GET',
  path,
  watch: true,
  events: fixture<unknown[]>(name),
  hold,
});
/** The Status an API server sends for a resourceVersion it no longer keeps. */
const expiredStatus = fixture<{ object: unknown }[]>('watch-expired.json')[0]!.object;
const idle = (path: string): Exchange => ({ method: 'GET', path, watch: true, events: [], hold: true });

describe('watch', () => {
  it('follows a new claim from pending to ready on the node of its pod', async () => {
    const r = await replayAdapter([
      list(CLAIMS_PATH, 'claims-list-new.json'),
      list(PODS_PATH, 'pods-list-empty.json'),
      watch(CLAIMS_PATH, 'watch-claims-becomes-ready.json'),
      watch(PODS_PATH, 'watch-pods-becomes-ready.json'),
    ]);
    server = r.server;
    const seen = await statuses(r.adapter, (s) => s.state === 'ready');
    expect(seen[0]).toEqual({
      state: 'pending',
      sandboxId: SANDBOX,
      detail: 'waiting for agent-sandbox to take the claim',
    });
    expect(seen.at(-1)).toEqual({
      state: 'ready',
      sandboxId: SANDBOX,
      nodeName: 'node-a',
      podIP: '10.244.1.17',
    });
    expect(seen.every((s) => s.state === 'pending' || s === seen.at(-1))).toBe(true);
    // Both watches start at their list's resourceVersion, selecting the adapter's claims and sandbox pods.
    const watches = server.requests.filter((q) => q.query['watch'] === 'true');
    expect(watches.map((q) => [q.path, q.query['resourceVersion'], q.query['labelSelector']])).toEqual(
      expect.arrayContaining([
        [CLAIMS_PATH, '1001', 'app.kubernetes.io/managed-by=agentfense'],
        [PODS_PATH, '1001', 'agents.x-k8s.io/claim-uid'],
      ]),
    );
    expect(server.unexpected).toEqual([]);
  });

  it('re-lists after 410 Gone and resumes a closed watch from the last resourceVersion (bookmarks too)', async () => {
    const r = await replayAdapter([
      list(CLAIMS_PATH, 'claims-list-new.json'),
      list(PODS_PATH, 'pods-list-empty.json'),
      watch(CLAIMS_PATH, 'watch-expired.json', false),
      watch(PODS_PATH, 'watch-pods-becomes-ready.json'),
      list(CLAIMS_PATH, 'claims-list-ready.json'),
      watch(CLAIMS_PATH, 'watch-claims-bookmark.json', false),
      idle(CLAIMS_PATH),
    ]);
    server = r.server;
    const s = server;
    const stream = follow(r.adapter);
    await vi.waitFor(() => {
      expect(stream.seen.at(-1)).toEqual({
        state: 'ready',
        sandboxId: SANDBOX,
        nodeName: 'node-a',
        podIP: '10.244.1.17',
      });
      expect(s.unused).toEqual([]);
    });
    await stream.stop();
    const claimCalls = s.requests.filter((q) => q.path === CLAIMS_PATH);
    expect(claimCalls.map((q) => [q.query['watch'] ?? 'list', q.query['resourceVersion'] ?? '-'])).toEqual([
      ['list', '-'],
      ['true', '1001'],
      ['list', '-'],
      ['true', '1200'],
      ['true', '1250'],
    ]);
    expect(s.unexpected).toEqual([]);
    expect(r.errors).toEqual([]);
  });

  it('re-lists when the watch request itself is answered 410 Gone', async () => {
    const r = await replayAdapter([
      list(CLAIMS_PATH, 'claims-list-ready.json'),
      list(PODS_PATH, 'pods-list-empty.json'),
      idle(CLAIMS_PATH),
      { method: 'GET', path: PODS_PATH, watch: true, status: 410, body: expiredStatus },
      list(PODS_PATH, 'pods-list-node-a.json'),
      idle(PODS_PATH),
    ]);
    server = r.server;
    const seen = await statuses(r.adapter, (s) => s.state === 'ready');
    expect(seen.at(-1)).toEqual({
      state: 'ready',
      sandboxId: SANDBOX,
      nodeName: 'node-a',
      podIP: '10.244.1.17',
    });
    const s = server;
    await vi.waitFor(() => {
      const podCalls = s.requests.filter((q) => q.path === PODS_PATH);
      expect(podCalls.map((q) => q.query['watch'] ?? 'list')).toEqual(['list', 'true', 'list', 'true']);
    });
    expect(r.errors).toEqual([]);
  });

  it('reports a node lost with what went with it, then the pod placed again on another node', async () => {
    const r = await replayAdapter([
      list(CLAIMS_PATH, 'claims-list-ready.json'),
      list(PODS_PATH, 'pods-list-node-a.json'),
      watch(CLAIMS_PATH, 'watch-claims-node-lost.json'),
      watch(PODS_PATH, 'watch-pods-node-lost.json'),
    ]);
    server = r.server;
    const seen = await statuses(r.adapter, (s) => s.state === 'ready' && s.nodeName === 'node-b');
    const steps = seen.map((s) => (s.state === 'ready' ? `ready:${s.nodeName}` : s.state));
    // Consecutive pendings (pod not ready, then claim not ready) carry different reasons; one step here.
    const collapsed = steps.filter((step, i) => step !== 'pending' || steps[i - 1] !== 'pending');
    expect(collapsed).toEqual(['ready:node-a', 'pending', 'lost', 'pending', 'ready:node-b']);
    const lost = seen.filter((s) => s.state === 'lost');
    expect(lost).toEqual([
      {
        state: 'lost',
        sandboxId: SANDBOX,
        reason: 'node-lost',
        nodeName: 'node-a',
        replaced: true,
        detail:
          'node node-a went away (DeletionByTaintManager: Taint manager: deleting due to NoExecute taint); ' +
          'its processes and sessions there ended, and changes since its last checkpoint stayed there',
      },
    ]);
    expect(server.unexpected).toEqual([]);
  });

  it('reports a claim agent-sandbox will not serve as lost, not replaced', async () => {
    const r = await replayAdapter([
      list(CLAIMS_PATH, 'claims-list-no-pool.json'),
      list(PODS_PATH, 'pods-list-empty.json'),
      idle(CLAIMS_PATH),
      idle(PODS_PATH),
    ]);
    server = r.server;
    const seen = await statuses(r.adapter, (s) => s.state === 'lost');
    expect(seen).toEqual([
      {
        state: 'lost',
        sandboxId: SANDBOX,
        reason: 'failed',
        nodeName: undefined,
        replaced: false,
        detail: 'WarmPoolNotFound: SandboxWarmPool "agentfense-small" not found',
      },
    ]);
  });

  it('reports gone once the claim is deleted', async () => {
    const r = await replayAdapter([
      list(CLAIMS_PATH, 'claims-list-ready.json'),
      list(PODS_PATH, 'pods-list-node-a.json'),
      watch(CLAIMS_PATH, 'watch-claims-deleted.json'),
      watch(PODS_PATH, 'watch-pods-deleted.json'),
    ]);
    server = r.server;
    const seen = await statuses(r.adapter, (s) => s.state === 'gone');
    expect(seen[0]).toEqual({ state: 'ready', sandboxId: SANDBOX, nodeName: 'node-a', podIP: '10.244.1.17' });
    expect(seen.at(-1)).toEqual({ state: 'gone', sandboxId: SANDBOX });
    // Removing a sandbox is not losing it.
    expect(seen.filter((s) => s.state === 'lost')).toEqual([]);
  });

  it('ends when its signal aborts, and closes its watches', async () => {
    const r = await replayAdapter([
      list(CLAIMS_PATH, 'claims-list-ready.json'),
      list(PODS_PATH, 'pods-list-node-a.json'),
      idle(CLAIMS_PATH),
      idle(PODS_PATH),
    ]);
    server = r.server;
    const s = server;
    const stream = follow(r.adapter);
    await vi.waitFor(() => expect(s.unused).toEqual([]));
    await stream.stop();
    expect(stream.ended).toBe(true);
  });
});

/** Follows the stream in the background until `stop`. */
function follow(adapter: KubernetesOrchestrator): {
  seen: PlacementStatus[];
  ended: boolean;
  stop(): Promise<void>;
} {
  const controller = new AbortController();
  const out = { seen: [] as PlacementStatus[], ended: false, stop: async () => {} };
  const done = (async () => {
    for await (const status of adapter.watch({ signal: controller.signal })) out.seen.push(status);
    out.ended = true;
  })();
  out.stop = async () => {
    controller.abort();
    await done;
  };
  return out;
}
