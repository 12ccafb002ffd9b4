// A control plane placing sandboxes with a blob store (serve --orchestrator … --blobs DIR): the codebase
// reaches the node as a snapshot id, not a path; the snapshot is the codebase as it was at the first
// start, recorded and sent again on later starts (the node's delta is relative to it), and commit is
// refused with the reason before any node agent is called. Orchestrator and node agent are stand-ins.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore, NodeBlobCache } from '@agentfense/blobs';
import { ControlPlane, RemoteSandboxError } from '@agentfense/control';
import { fakeOrchestrator, startFakeNodeAgent, type FakeNodeAgent } from '../helpers/placement-fakes.js';

const TOKEN = 'node-agent-token-0123456789abcdef0123';

describe('placing with a blob store', () => {
  let dir: string;
  let agent: FakeNodeAgent;
  let store: FsBlobStore;
  let plane: ControlPlane;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'af-placement-snap-'));
    agent = await startFakeNodeAgent();
    store = await FsBlobStore.open(join(dir, 'blobs'));
    plane = await ControlPlane.open({
      dataDir: join(dir, 'data'),
      workerPoolSize: 0,
      placement: {
        orchestrator: fakeOrchestrator(agent.port),
        nodeAgentToken: TOKEN,
        image: 'sandbox:test',
        readyTimeoutMs: 2000,
        blobs: store,
      },
    });
  });

  afterAll(async () => {
    await plane.close();
    await agent.close();
    await rm(dir, { recursive: true, force: true });
  });

  const attaches = (): Record<string, unknown>[] =>
    agent.seen
      .filter((s) => s.method === 'POST' && s.url === '/v1/sandboxes')
      .map((s) => JSON.parse(s.body) as Record<string, unknown>);

  it('sends a snapshot of the codebase, the same one on every start, and refuses commit', async () => {
    const codebaseId = (await plane.createCodebase({ name: 'app' })).id;
    await plane.uploadFile(codebaseId, 'src/main.txt', Buffer.from('version one\n'));
    const sb = await plane.createSandbox({ codebaseId });
    await plane.startSandbox(sb.id);

    const [first] = attaches();
    expect(first?.['codebasePath']).toBeUndefined();
    const snapshotId = String(first?.['snapshotId']);
    expect(snapshotId).toMatch(/^[0-9a-f]{64}$/);
    // What a node materialises from that id is the codebase as it was.
    const cache = await NodeBlobCache.open({ root: join(dir, 'node-cache'), store, maxBytes: 1 << 20 });
    const lease = await cache.materialise(snapshotId as never);
    expect(await readFile(join(lease.path, 'src/main.txt'), 'utf8')).toBe('version one\n');
    lease.release();

    // Commit: refused here, no node agent called.
    agent.seen.length = 0;
    const refused = await plane.commit(sb.id).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RemoteSandboxError);
    expect((refused as RemoteSandboxError).reason).toBe('not-routed');
    expect(String((refused as Error).message)).toContain('read its changes or diff');
    expect(agent.seen).toEqual([]);

    // The codebase changes meanwhile; the sandbox starts again on the snapshot its delta was made on.
    await plane.stopSandbox(sb.id);
    await plane.uploadFile(codebaseId, 'src/main.txt', Buffer.from('version two\n'));
    agent.seen.length = 0;
    await plane.startSandbox(sb.id);
    expect(attaches().map((a) => a['snapshotId'])).toEqual([snapshotId]);

    // A new sandbox of the codebase gets the codebase as it is now.
    const second = await plane.createSandbox({ codebaseId });
    agent.seen.length = 0;
    await plane.startSandbox(second.id);
    const [fresh] = attaches();
    expect(fresh?.['snapshotId']).not.toBe(snapshotId);
    await plane.destroySandbox(sb.id);
    await plane.destroySandbox(second.id);
  });
});
