// Send a sandbox's commands to the wrong place. The API calls the node agent that `locate` names for a
// sandbox, so whoever gets named receives the sandbox's exec, sessions and files. Three ways to be named:
// a pod that copies the node agent's labels on the sandbox's node (not the DaemonSet's), a node agent of
// another node in an answer wider than asked (a field selector a proxy or an older server dropped), and
// a claim of someone else's labelled with the victim's sandbox id (to take over its status and location).
//
// The Kubernetes API is an in-memory fake behind the adapter's injected client: the attack is on what the
// adapter trusts in the answers, not on the transport.
import { describe, expect, it } from 'vitest';
import {
  KubernetesOrchestrator,
  type KubeApi,
  type Pod,
  type SandboxClaim,
} from '@agentfense/orchestrator/kubernetes';

const VICTIM = 'sb_3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c';
const CLAIM_UID = '8d1c6f0e-2a5b-4c3d-9e7f-0a1b2c3d4e5f';
const AGENT_LABELS = { 'app.kubernetes.io/name': 'agentfense', 'app.kubernetes.io/component': 'node-agent' };

function pod(name: string, node: string, ip: string, extra: Partial<NonNullable<Pod['metadata']>> = {}): Pod {
  return {
    metadata: { name, uid: `uid-${name}`, ...extra },
    spec: { nodeName: node },
    status: { phase: 'Running', podIP: ip, conditions: [{ type: 'Ready', status: 'True' }] },
  };
}

const daemonSetOwned = {
  ownerReferences: [{ kind: 'DaemonSet', name: 'agentfense-node', controller: true }],
};

const claim: SandboxClaim = {
  metadata: {
    name: 'sb-3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c',
    uid: CLAIM_UID,
    labels: { 'app.kubernetes.io/managed-by': 'agentfense', 'agentfense.dev/sandbox-id': VICTIM },
  },
  spec: { warmPoolRef: { name: 'agentfense-small' } },
  status: { conditions: [{ type: 'Ready', status: 'True' }] },
};
const sandboxPod = pod('agentfense-small-x7k2p', 'node-a', '10.244.1.17', {
  labels: { 'agents.x-k8s.io/claim-uid': CLAIM_UID },
});

/** An API that answers node-agent queries with `agents`, whatever the field selector asked. */
function fakeApi(agents: Pod[], claims: SandboxClaim[] = [claim]): KubeApi {
  const unused = (): never => {
    throw new Error('not used by this attack');
  };
  return {
    createClaim: unused,
    deleteClaim: unused,
    getClaim: (_ns, name) => Promise.resolve(claims.find((c) => c.metadata.name === name)),
    listClaims: () => Promise.resolve({ items: claims, resourceVersion: '1' }),
    listPods: (_ns, { labelSelector }) =>
      Promise.resolve({
        items: labelSelector?.startsWith('agents.x-k8s.io/claim-uid') === true ? [sandboxPod] : agents,
        resourceVersion: '1',
      }),
    watch: () => Promise.resolve({ abort: () => {} }),
  };
}

function adapter(api: KubeApi): KubernetesOrchestrator {
  return new KubernetesOrchestrator({
    api,
    namespace: 'agentfense',
    pools: [],
    nodeAgent: {
      namespace: 'agentfense',
      daemonSet: 'agentfense-node',
      labelSelector: 'app.kubernetes.io/component=node-agent',
      port: 7300,
    },
  });
}

describe('attack: route a sandbox to an impostor node agent', () => {
  it("a pod with the node agent's labels on the sandbox's node, but not the DaemonSet's, is never routed to", async () => {
    const impostor = pod('lookalike', 'node-a', '10.244.1.66', { labels: AGENT_LABELS });
    const real = pod('agentfense-node-q8z4m', 'node-a', '10.244.1.2', {
      labels: AGENT_LABELS,
      ...daemonSetOwned,
    });
    expect((await adapter(fakeApi([impostor, real])).locate(VICTIM))?.nodeAgent.host).toBe('10.244.1.2');
    // With the impostor alone, no route at all.
    await expect(adapter(fakeApi([impostor])).locate(VICTIM)).rejects.toMatchObject({
      reason: 'no-node-agent',
    });
  });

  it("another node's agent in a wider answer is never routed to", async () => {
    const elsewhere = pod('agentfense-node-b', 'node-b', '10.244.2.2', {
      labels: AGENT_LABELS,
      ...daemonSetOwned,
    });
    const here = pod('agentfense-node-a', 'node-a', '10.244.1.2', {
      labels: AGENT_LABELS,
      ...daemonSetOwned,
    });
    expect((await adapter(fakeApi([elsewhere, here])).locate(VICTIM))?.nodeAgent.host).toBe('10.244.1.2');
    await expect(adapter(fakeApi([elsewhere])).locate(VICTIM)).rejects.toMatchObject({
      reason: 'no-node-agent',
    });
  });

  it("a claim of another name labelled with the victim's id does not stand for the victim", async () => {
    const forged: SandboxClaim = structuredClone(claim);
    forged.metadata.name = 'sb-00000000-0000-4000-8000-000000000000';
    forged.metadata.uid = 'forged-uid';
    const statuses: unknown[] = [];
    const controller = new AbortController();
    const api = fakeApi([], [forged]);
    api.listPods = () => Promise.resolve({ items: [], resourceVersion: '1' });
    const watching = (async () => {
      for await (const status of adapter(api).watch({ signal: controller.signal })) statuses.push(status);
    })();
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    await watching;
    expect(statuses).toEqual([]);
  });
});
