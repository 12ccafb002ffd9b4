// `agentfense node --blobs http://…` end to end: the node agent shares no directory with the API tier; a
// real `agentfense serve --blobs DIR --node-agent-token-file F` serves the snapshot's blobs, and the node
// agent (holding the same token as its own) attaches a sandbox by snapshot id through them.
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FsBlobStore, snapshotDirectory } from '@agentfense/blobs';
import {
  call,
  createSandboxContainer,
  exec,
  randomToken,
  removeContainer,
  startAgent,
  type AgentProcess,
} from '#helpers/node-agent.js';
import { launchServer, stopAndCheck, type Served } from '../helpers/http-fixture.js';

const docker = inject('docker');
const dockerHost = docker.dockerHost ?? '';

describe.skipIf(docker.unavailable !== null)(
  `node agent: snapshots over HTTP from serve${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    let root: string;
    let served: Served | undefined;
    let agent: AgentProcess | undefined;
    let snapshotId: string;
    const token = randomToken();
    const containers: string[] = [];

    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'af-node-agent-http-'));
      const tree = join(root, 'tree');
      await mkdir(join(tree, 'src'), { recursive: true });
      await writeFile(join(tree, 'readme.txt'), 'served over HTTP\n');
      await writeFile(join(tree, 'src', 'main.sh'), 'echo main\n', { mode: 0o755 });
      const storeDir = join(root, 'api-store');
      snapshotId = (await snapshotDirectory(await FsBlobStore.open(storeDir), tree)).snapshotId;
      await writeFile(join(root, 'token'), `${token}\n`, { mode: 0o600 });
      served = await launchServer(
        ['--blobs', storeDir, '--node-agent-token-file', join(root, 'token')],
        join(root, 'data'),
      );
      agent = await startAgent({
        stateDir: join(root, 'state'),
        codebaseRoot: join(root, 'codebases'),
        token,
        tokenFile: join(root, 'token'),
        dockerHost,
        extraArgs: ['--blobs', served.url],
      });
    });

    afterAll(async () => {
      await agent?.stop();
      for (const id of containers) await removeContainer(dockerHost, id);
      if (served !== undefined) await stopAndCheck(served);
      await rm(root, { recursive: true, force: true });
    });

    it('attaches a sandbox by snapshot id read from serve', async () => {
      const sandboxId = `sb_${randomUUID()}`;
      containers.push(await createSandboxContainer(dockerHost, sandboxId));
      const attached = await call(agent!, token, 'POST', '/v1/sandboxes', {
        sandboxId,
        snapshotId,
        rules: [{ pattern: '**', permission: 'write' }],
      });
      expect(attached.status, attached.text).toBe(201);
      expect(await exec(agent!, token, sandboxId, ['cat', '/workspace/readme.txt'])).toEqual({
        stdout: 'served over HTTP\n',
        stderr: '',
        exitCode: 0,
      });
      expect((await exec(agent!, token, sandboxId, ['sh', '/workspace/src/main.sh'])).stdout).toBe('main\n');
      expect(await readdir(join(root, 'state', 'blob-cache', 'snapshots'))).toEqual([snapshotId]);
      const detached = await call(agent!, token, 'DELETE', `/v1/sandboxes/${sandboxId}?dropDelta=true`);
      expect(detached.status).toBe(200);
      // An id serve does not hold is not found on the node either.
      const unknown = await call(agent!, token, 'POST', '/v1/sandboxes', {
        sandboxId: `sb_${randomUUID()}`,
        snapshotId: 'f'.repeat(64),
        rules: [],
      });
      expect(unknown.status).toBe(404);
    });
  },
);
