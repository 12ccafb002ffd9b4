// Placing and removing a sandbox's service against recorded manager answers: the spec sent is the one
// the recording Swarm accepted, conflicts and refusals map to the package's reasons, and malformed
// requests never reach the manager.
import { afterEach, describe, expect, it } from 'vitest';
import { OrchestratorError, SANDBOX_WAIT_COMMAND, type PlacementRequest } from '../src/index.js';
import { SwarmOrchestrator, swarmApiFrom, type SwarmServiceSpec } from '../src/swarm/index.js';
import { createEngineApi } from '@agentfense/runtime-docker';
import {
  NODE_LABEL,
  SANDBOX_A,
  recorded,
  swarmFixture,
  swarmReplay,
  type EngineReplay,
} from './swarm-replay.js';

let replay: EngineReplay | undefined;
afterEach(async () => {
  await replay?.close();
  replay = undefined;
});

const REQUEST: PlacementRequest = {
  sandboxId: SANDBOX_A,
  image: 'afswarm/idle:1',
  resources: { cpuMillis: 250, memoryBytes: 64 * 2 ** 20 },
  labels: { 'agentfense.dev/owner': 'api-1' },
};

async function refusal(promise: Promise<unknown>): Promise<OrchestratorError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OrchestratorError);
  return error as OrchestratorError;
}

describe('place', () => {
  it('creates the one-replica service the recording Swarm accepted, reserving and limiting what was asked', async () => {
    const r = await swarmReplay([recorded('POST', '/services/create', 'create-a.json')]);
    replay = r.replay;
    await r.adapter.place(REQUEST);
    const sent = r.replay.requests[0]!;
    expect(sent.method).toBe('POST');
    expect(sent.body).toEqual(swarmFixture('service-spec-a.json'));
    const spec = sent.body as { TaskTemplate: { Resources: unknown; Placement: unknown }; Mode: unknown };
    expect(spec.TaskTemplate.Resources).toEqual({
      Limits: { NanoCPUs: 250_000_000, MemoryBytes: 64 * 2 ** 20, Pids: 1024 },
      Reservations: { NanoCPUs: 250_000_000, MemoryBytes: 64 * 2 ** 20 },
    });
    expect(spec.TaskTemplate.Placement).toEqual({ Constraints: [`node.labels.${NODE_LABEL}==true`] });
    expect(spec.Mode).toEqual({ Replicated: { Replicas: 1 } });
    // The container waits for its node agent and becomes af-init: the image's own entrypoint never runs.
    expect((sent.body as SwarmServiceSpec).TaskTemplate.ContainerSpec.Command).toEqual(SANDBOX_WAIT_COMMAND);
  });

  it('adds the configured constraints after the node agent one', async () => {
    const r = await swarmReplay([recorded('POST', '/services/create', 'create-a.json')], {
      constraints: ['node.role==worker'],
    });
    replay = r.replay;
    await r.adapter.place(REQUEST);
    const body = r.replay.requests[0]!.body as { TaskTemplate: { Placement: { Constraints: string[] } } };
    expect(body.TaskTemplate.Placement.Constraints).toEqual([
      `node.labels.${NODE_LABEL}==true`,
      'node.role==worker',
    ]);
  });

  it('reports a sandbox placed twice as already-placed', async () => {
    const r = await swarmReplay([recorded('POST', '/services/create', 'create-a-conflict.json')]);
    replay = r.replay;
    const error = await refusal(r.adapter.place(REQUEST));
    expect([error.reason, error.code]).toEqual(['already-placed', 'AF_ALREADY_EXISTS']);
  });

  it('reports an engine that is not a manager as unavailable, and a refused spec as invalid', async () => {
    const r = await swarmReplay([
      recorded('POST', '/services/create', 'error-not-manager.json'),
      recorded('POST', '/services/create', 'error-invalid-name.json'),
    ]);
    replay = r.replay;
    const notManager = await refusal(r.adapter.place(REQUEST));
    expect([notManager.reason, notManager.code]).toEqual(['unavailable', 'AF_UNAVAILABLE']);
    expect(notManager.message).toContain('not a swarm manager');
    const invalid = await refusal(r.adapter.place(REQUEST));
    expect([invalid.reason, invalid.code]).toEqual(['invalid-request', 'AF_INVALID_ARGUMENT']);
  });

  it('refuses malformed requests before asking the manager', async () => {
    const r = await swarmReplay([]);
    replay = r.replay;
    const bad: PlacementRequest[] = [
      { ...REQUEST, sandboxId: 'sb_not-a-uuid' },
      { ...REQUEST, labels: { 'agentfense.dev/sandbox-id': 'sb_other' } },
      { ...REQUEST, labels: { 'com.docker.swarm.service.name': 'x' } },
      { ...REQUEST, resources: { cpuMillis: 0, memoryBytes: 2 ** 30 } },
      { ...REQUEST, resources: { cpuMillis: 100, memoryBytes: 2 ** 20 } },
      { ...REQUEST, image: 'two words' },
    ];
    for (const request of bad) {
      expect((await refusal(r.adapter.place(request))).reason).toBe('invalid-request');
    }
    expect(r.replay.requests).toEqual([]);
  });

  it('refuses a node label Swarm could not constrain on when the adapter is made', () => {
    const make = (): SwarmOrchestrator =>
      new SwarmOrchestrator({
        api: swarmApiFrom(createEngineApi('unix:///nonexistent/agentfense-swarm.sock')),
        nodeAgent: { port: 7300, nodeLabel: 'agentfense.dev/node-agent' },
      });
    expect(make).toThrow(expect.objectContaining({ reason: 'invalid-request' }) as Error);
  });

  it('reports a manager that does not answer as unavailable', async () => {
    const adapter = new SwarmOrchestrator({
      api: swarmApiFrom(createEngineApi('unix:///nonexistent/agentfense-swarm.sock')),
      nodeAgent: { port: 7300 },
    });
    const error = await refusal(adapter.place(REQUEST));
    expect([error.reason, error.code]).toEqual(['unavailable', 'AF_UNAVAILABLE']);
  });

  it('reports an answer that is not JSON as bad-response', async () => {
    const r = await swarmReplay([{ method: 'GET', path: '/services', raw: '<html>proxy</html>' }]);
    replay = r.replay;
    const error = await refusal(r.adapter.findUnowned(() => true));
    expect([error.reason, error.code]).toEqual(['bad-response', 'AF_PROTOCOL']);
  });
});

describe('remove', () => {
  it('deletes the service, and a sandbox that is not placed is no error', async () => {
    const r = await swarmReplay([
      { method: 'DELETE', path: '/services/sb-3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c', status: 200, raw: '' },
      recorded('DELETE', '/services/sb-3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c', 'error-service-not-found.json'),
    ]);
    replay = r.replay;
    await r.adapter.remove(SANDBOX_A);
    await r.adapter.remove(SANDBOX_A);
    expect(r.replay.unused).toEqual([]);
  });
});
