// Send a sandbox's commands to the wrong place on Swarm. The API calls the node agent at the address
// `locate` names, so whoever gets named receives the sandbox's exec, sessions and files. Ways to be
// named: a task of another service in an answer wider than asked (a proxy that dropped the `service`
// filter), a node that joined the Swarm without the operator's node agent label (anyone with the worker
// join token can add one), a service that takes the sandbox's name without the adapter's labels, and one
// labelled with the victim's sandbox id under another name (to take over its status).
//
// The manager is an in-memory fake behind the adapter's injected calls: the attack is on what the
// adapter trusts in the answers, not on the transport.
import { describe, expect, it } from 'vitest';
import type { PlacementStatus } from '@agentfense/orchestrator';
import {
  SwarmOrchestrator,
  type SwarmApi,
  type SwarmNode,
  type SwarmService,
  type SwarmTask,
} from '@agentfense/orchestrator/swarm';

const VICTIM = 'sb_3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c';
const NAME = 'sb-3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c';
const OURS = { 'agentfense.dev/managed-by': 'agentfense', 'agentfense.dev/sandbox-id': VICTIM };

const service = (id: string, name: string, labels: Record<string, string>): SwarmService => ({
  ID: id,
  Spec: { Name: name, Labels: labels },
});
const task = (id: string, serviceId: string, nodeId: string, index: number): SwarmTask => ({
  ID: id,
  ServiceID: serviceId,
  NodeID: nodeId,
  Version: { Index: index },
  DesiredState: 'running',
  Status: { State: 'running', Message: 'started' },
});
const node = (id: string, hostname: string, addr: string, labelled: boolean): SwarmNode => ({
  ID: id,
  Spec: { Labels: labelled ? { 'agentfense.node-agent': 'true' } : {} },
  Description: { Hostname: hostname },
  Status: { State: 'ready', Addr: addr },
});

const NODES = [node('n-good', 'swarm-1', '10.0.0.1', true), node('n-evil', 'evil', '10.0.0.66', true)];

function fakeManager(answer: { services: SwarmService[]; tasks: SwarmTask[]; nodes: SwarmNode[] }): SwarmApi {
  return {
    createService: () => Promise.reject(new Error('not used')),
    removeService: () => Promise.resolve(true),
    relabelService: () => Promise.reject(new Error('not used')),
    inspectService: (name) => Promise.resolve(answer.services.find((s) => s.Spec.Name === name)),
    listServices: () => Promise.resolve(answer.services),
    // Ignores every filter: the widest answer a proxy could give.
    listTasks: () => Promise.resolve(answer.tasks),
    listNodes: () => Promise.resolve(answer.nodes),
  };
}

function adapter(api: SwarmApi): SwarmOrchestrator {
  return new SwarmOrchestrator({
    api,
    nodeAgent: { port: 7300, nodeLabel: 'agentfense.node-agent' },
    pollIntervalMs: 5,
  });
}

describe('Swarm routing attacks', () => {
  it("a task of another service in a wider answer does not get the victim's commands", async () => {
    const api = fakeManager({
      services: [service('svc-victim', NAME, OURS)],
      // The attacker's task is newer and on the attacker's node; the victim's runs on swarm-1.
      tasks: [task('t-victim', 'svc-victim', 'n-good', 10), task('t-evil', 'svc-evil', 'n-evil', 99)],
      nodes: NODES,
    });
    expect((await adapter(api).locate(VICTIM))?.nodeAgent).toEqual({ host: '10.0.0.1', port: 7300 });
  });

  it('a node without the node agent label is refused, never called', async () => {
    const api = fakeManager({
      services: [service('svc-victim', NAME, OURS)],
      tasks: [task('t-victim', 'svc-victim', 'n-joined', 10)],
      nodes: [node('n-joined', 'joined', '10.0.0.77', false)],
    });
    const error = await adapter(api)
      .locate(VICTIM)
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: 'no-node-agent', details: { nodeName: 'joined' } });
  });

  it("a service with the sandbox's name but not the adapter's labels is not the sandbox", async () => {
    const api = fakeManager({
      services: [service('svc-evil', NAME, {})],
      tasks: [task('t-evil', 'svc-evil', 'n-evil', 10)],
      nodes: NODES,
    });
    expect(await adapter(api).locate(VICTIM)).toBeUndefined();
  });

  it("a service labelled with the victim's id under another name does not take over its status", async () => {
    const api = fakeManager({
      services: [service('svc-victim', NAME, OURS), service('svc-evil', 'evil', OURS)],
      tasks: [task('t-victim', 'svc-victim', 'n-good', 10), task('t-evil', 'svc-evil', 'n-evil', 99)],
      nodes: NODES,
    });
    const seen: PlacementStatus[] = [];
    const controller = new AbortController();
    for await (const status of adapter(api).watch({ signal: controller.signal })) {
      seen.push(status);
      controller.abort();
    }
    expect(seen).toEqual([{ state: 'ready', sandboxId: VICTIM, nodeName: 'swarm-1', podIP: '' }]);
  });
});
