// A node that returns unmounts the views of every sandbox the orchestrator now runs elsewhere, or not at
// all, and keeps those placed on it (even while its own agent is not ready yet).
import { describe, expect, it } from 'vitest';
import { OrchestratorError, findLeftovers, type Location } from '../src/index.js';

const A = 'sb_00000000-0000-4000-8000-00000000000a';
const B = 'sb_00000000-0000-4000-8000-00000000000b';
const C = 'sb_00000000-0000-4000-8000-00000000000c';
const D = 'sb_00000000-0000-4000-8000-00000000000d';

function at(nodeName: string, sandboxId: string): Location {
  return { sandboxId, nodeName, podIP: '10.0.0.1', nodeAgent: { host: '10.0.0.2', port: 7300 } };
}

describe('findLeftovers', () => {
  it('keeps what runs on this node and returns the rest', async () => {
    const where: Record<string, () => Location | undefined> = {
      [A]: () => at('node-a', A), // still here
      [B]: () => at('node-b', B), // placed again on another node while node-a was away
      [C]: () => undefined, // removed, or not ready anywhere
      [D]: () => {
        throw new OrchestratorError('no-node-agent', 'no ready node agent on node-a', {
          details: { nodeName: 'node-a' },
        });
      },
    };
    const orchestrator = { locate: (id: string) => Promise.resolve().then(() => where[id]!()) };
    expect(await findLeftovers(orchestrator, 'node-a', [A, B, C, D])).toEqual([B, C]);
  });

  it('fails rather than guess when the orchestrator cannot say', async () => {
    const orchestrator = {
      locate: () => Promise.reject(new OrchestratorError('unavailable', 'the API server is down')),
    };
    await expect(findLeftovers(orchestrator, 'node-a', [A])).rejects.toMatchObject({ reason: 'unavailable' });
  });
});
