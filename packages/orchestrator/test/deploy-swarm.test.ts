// deploy/swarm against the code: the sandbox service template is exactly what the adapter creates (so the
// documented template cannot drift from it), the API stack runs only on managers with no capability,
// and the node agent runs outside Swarm.
import { readFileSync } from 'node:fs';
import { load } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { SwarmOrchestrator, type SwarmApi, type SwarmServiceSpec } from '../src/swarm/index.js';

const DEPLOY = new URL('../../../deploy/swarm/', import.meta.url);
const read = (name: string): string => readFileSync(new URL(name, DEPLOY), 'utf8');

describe('deploy/swarm', () => {
  it('sandbox-service.json is the service the adapter creates for its example sandbox', async () => {
    const sent: SwarmServiceSpec[] = [];
    const api = {
      createService: (spec: SwarmServiceSpec) => Promise.resolve(String(sent.push(spec))),
    } as unknown as SwarmApi;
    const adapter = new SwarmOrchestrator({
      api,
      nodeAgent: { port: 7300, nodeLabel: 'agentfense.node-agent' },
    });
    await adapter.place({
      sandboxId: 'sb_3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c',
      image: 'ghcr.io/agentfense/sandbox:0.1.0',
      resources: { cpuMillis: 1000, memoryBytes: 2 ** 30 },
    });
    expect(sent).toEqual([JSON.parse(read('sandbox-service.json'))]);
    expect(sent[0]!.TaskTemplate.ContainerSpec.CapabilityDrop).toEqual(['ALL']);
  });

  it('the API stack: managers only, no capability, read-only root, the token as a secret', () => {
    const stack = load(read('api-stack.yml')) as {
      services: Record<
        string,
        Record<string, unknown> & { deploy: { placement: { constraints: string[] } } }
      >;
    };
    expect(Object.keys(stack.services)).toEqual(['api']);
    const api = stack.services['api']!;
    expect(api.deploy.placement.constraints).toEqual(['node.role==manager']);
    expect(api['cap_drop']).toEqual(['ALL']);
    expect(api['read_only']).toBe(true);
    expect(api['privileged']).toBeUndefined();
    expect(api['secrets']).toEqual(['agentfense-api-token']);
    expect((api['command'] as string[]).slice(0, 1)).toEqual(['serve']);
  });

  it('the node agent is a systemd unit outside Swarm, restarted always, as root', () => {
    const unit = read('node-agent.service');
    expect(unit).toMatch(/^ExecStart=\/usr\/local\/bin\/agentfense node /m);
    expect(unit).toMatch(/^Restart=always$/m);
    expect(unit).not.toMatch(/^(User|DynamicUser)=/m);
  });
});
