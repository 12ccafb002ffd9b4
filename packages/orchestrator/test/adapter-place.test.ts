// place, remove and locate against recorded API responses: the requests the client sends, and what the
// adapter makes of each answer (created, already there, forbidden, not found, routed to a node agent).
import { afterEach, describe, expect, it } from 'vitest';
import { OrchestratorError } from '../src/index.js';
import { fixture, type ReplayServer } from './replay.js';
import { CLAIM, CLAIMS_PATH, IMAGE, PODS_PATH, SANDBOX, replayAdapter } from './setup.js';

const REQUEST = {
  sandboxId: SANDBOX,
  image: IMAGE,
  resources: { cpuMillis: 500, memoryBytes: 512 * 2 ** 20 },
  labels: { 'agentfense.dev/tenant': 'acme' },
};

let server: ReplayServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function failure(promise: Promise<unknown>): Promise<OrchestratorError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OrchestratorError);
  return error as OrchestratorError;
}

describe('place', () => {
  it('creates one SandboxClaim on the smallest warm pool that fits', async () => {
    const r = await replayAdapter([
      { method: 'POST', path: CLAIMS_PATH, status: 201, body: fixture('claim-created.json') },
    ]);
    server = r.server;
    await r.adapter.place(REQUEST);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]!.body).toEqual({
      apiVersion: 'extensions.agents.x-k8s.io/v1beta1',
      kind: 'SandboxClaim',
      metadata: {
        name: CLAIM,
        namespace: 'agentfense',
        labels: {
          'agentfense.dev/tenant': 'acme',
          'app.kubernetes.io/managed-by': 'agentfense',
          'agentfense.dev/sandbox-id': SANDBOX,
        },
      },
      spec: { warmPoolRef: { name: 'agentfense-small' }, lifecycle: { shutdownPolicy: 'Delete' } },
    });
  });

  it('reports a claim that exists as already-placed, and RBAC refusals as forbidden', async () => {
    const r = await replayAdapter([
      { method: 'POST', path: CLAIMS_PATH, status: 409, body: fixture('status-already-exists.json') },
      { method: 'POST', path: CLAIMS_PATH, status: 403, body: fixture('status-forbidden.json') },
    ]);
    server = r.server;
    const exists = await failure(r.adapter.place(REQUEST));
    expect([exists.reason, exists.code]).toEqual(['already-placed', 'AF_ALREADY_EXISTS']);
    const forbidden = await failure(r.adapter.place(REQUEST));
    expect([forbidden.reason, forbidden.code]).toEqual(['forbidden', 'AF_PERMISSION_DENIED']);
  });

  it('refuses, before any request, what no pool offers and what is not a sandbox id or a label', async () => {
    const r = await replayAdapter([]);
    server = r.server;
    const big = await failure(
      r.adapter.place({ ...REQUEST, resources: { cpuMillis: 8000, memoryBytes: 2 ** 30 } }),
    );
    expect(big.reason).toBe('no-pool-fits');
    const image = await failure(r.adapter.place({ ...REQUEST, image: 'debian:12' }));
    expect(image.reason).toBe('no-pool-fits');
    const id = await failure(r.adapter.place({ ...REQUEST, sandboxId: 'sb_../../x' }));
    expect(id.reason).toBe('invalid-request');
    const label = await failure(
      r.adapter.place({ ...REQUEST, labels: { 'agentfense.dev/sandbox-id': 'sb_other' } }),
    );
    expect(label.reason).toBe('invalid-request');
    expect(server.requests).toEqual([]);
  });
});

describe('remove', () => {
  it('deletes the claim in the background, and a claim already gone is not an error', async () => {
    const r = await replayAdapter([
      { method: 'DELETE', path: `${CLAIMS_PATH}/${CLAIM}`, body: fixture('claim-deleting.json') },
      {
        method: 'DELETE',
        path: `${CLAIMS_PATH}/${CLAIM}`,
        status: 404,
        body: fixture('status-not-found.json'),
      },
    ]);
    server = r.server;
    await r.adapter.remove(SANDBOX);
    await r.adapter.remove(SANDBOX);
    expect(server.requests.map((q) => [q.method, q.path, q.query['propagationPolicy']])).toEqual([
      ['DELETE', `${CLAIMS_PATH}/${CLAIM}`, 'Background'],
      ['DELETE', `${CLAIMS_PATH}/${CLAIM}`, 'Background'],
    ]);
  });
});

describe('locate', () => {
  it("routes to the node agent on the serving pod's node", async () => {
    const r = await replayAdapter([
      { method: 'GET', path: `${CLAIMS_PATH}/${CLAIM}`, body: fixture('claim-ready-node-b.json') },
      { method: 'GET', path: PODS_PATH, body: fixture('pods-list-node-b.json') },
      { method: 'GET', path: PODS_PATH, body: fixture('node-agents-node-b.json') },
    ]);
    server = r.server;
    expect(await r.adapter.locate(SANDBOX)).toEqual({
      sandboxId: SANDBOX,
      nodeName: 'node-b',
      podIP: '10.244.2.9',
      nodeAgent: { host: '10.244.2.2', port: 7300 },
    });
    expect(server.requests.map((q) => q.query)).toEqual([
      {},
      { labelSelector: 'agents.x-k8s.io/claim-uid=8d1c6f0e-2a5b-4c3d-9e7f-0a1b2c3d4e5f' },
      { labelSelector: 'app.kubernetes.io/component=node-agent', fieldSelector: 'spec.nodeName=node-b' },
    ]);
  });

  it('is undefined for a sandbox not placed or not ready, and no-node-agent when its node has none ready', async () => {
    const r = await replayAdapter([
      { method: 'GET', path: `${CLAIMS_PATH}/${CLAIM}`, status: 404, body: fixture('status-not-found.json') },
      { method: 'GET', path: `${CLAIMS_PATH}/${CLAIM}`, body: fixture('claim-created.json') },
      { method: 'GET', path: `${CLAIMS_PATH}/${CLAIM}`, body: fixture('claim-ready-node-b.json') },
      { method: 'GET', path: PODS_PATH, body: fixture('pods-list-node-b.json') },
      { method: 'GET', path: PODS_PATH, body: fixture('node-agents-none-ready.json') },
    ]);
    server = r.server;
    expect(await r.adapter.locate(SANDBOX)).toBeUndefined();
    expect(await r.adapter.locate(SANDBOX)).toBeUndefined();
    const none = await failure(r.adapter.locate(SANDBOX));
    expect([none.reason, none.code, none.details]).toEqual([
      'no-node-agent',
      'AF_UNAVAILABLE',
      { nodeName: 'node-b', reason: 'no-node-agent' },
    ]);
    expect(server.unexpected).toEqual([]);
  });
});
