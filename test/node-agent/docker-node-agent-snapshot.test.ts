// `agentfense node --blobs DIR` end to end: a codebase snapshotted into the shared blob store, a sandbox
// attached by snapshot id (materialised through the node's cache, no codebase path on the node), commands
// reading and changing it through the view, the cache's files left as the snapshot made them, commit
// refused (the tree is shared cache objects), and malformed or unknown snapshot ids refused.
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
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

const docker = inject('docker');
const dockerHost = docker.dockerHost ?? '';
const RULES = [
  { pattern: '**', permission: 'write' },
  { pattern: 'secret.txt', permission: 'none' },
];

describe.skipIf(docker.unavailable !== null)(
  `node agent: attach by snapshot id${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    let root: string;
    let agent: AgentProcess | undefined;
    let snapshotId: string;
    const token = randomToken();
    const containers: string[] = [];

    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'af-node-agent-snap-'));
      const tree = join(root, 'tree');
      await mkdir(join(tree, 'src'), { recursive: true });
      await writeFile(join(tree, 'readme.txt'), 'hello from the snapshot\n');
      await writeFile(join(tree, 'secret.txt'), 'the secret\n');
      await writeFile(join(tree, 'src', 'main.sh'), 'echo main\n', { mode: 0o755 });
      const store = await FsBlobStore.open(join(root, 'store'));
      snapshotId = (await snapshotDirectory(store, tree)).snapshotId;
      agent = await startAgent({
        stateDir: join(root, 'state'),
        codebaseRoot: join(root, 'codebases'),
        token,
        tokenFile: join(root, 'token'),
        dockerHost,
        extraArgs: ['--blobs', join(root, 'store')],
      });
    });

    afterAll(async () => {
      await agent?.stop();
      for (const id of containers) await removeContainer(dockerHost, id);
      await rm(root, { recursive: true, force: true });
    });

    it('attaches a sandbox by snapshot id and leaves the cached snapshot unchanged', async () => {
      const sandboxId = `sb_${randomUUID()}`;
      containers.push(await createSandboxContainer(dockerHost, sandboxId));
      const attached = await call(agent!, token, 'POST', '/v1/sandboxes', {
        sandboxId,
        snapshotId,
        rules: RULES,
      });
      expect(attached.status, attached.text).toBe(201);

      expect(await exec(agent!, token, sandboxId, ['cat', '/workspace/readme.txt'])).toEqual({
        stdout: 'hello from the snapshot\n',
        stderr: '',
        exitCode: 0,
      });
      expect(await exec(agent!, token, sandboxId, ['sh', '/workspace/src/main.sh'])).toMatchObject({
        stdout: 'main\n',
        exitCode: 0,
      });
      const hidden = await exec(agent!, token, sandboxId, ['cat', '/workspace/secret.txt']);
      expect(hidden.exitCode).toBe(1);
      const wrote = await exec(agent!, token, sandboxId, [
        'sh',
        '-c',
        'echo changed > /workspace/readme.txt',
      ]);
      expect(wrote.exitCode).toBe(0);
      expect((await exec(agent!, token, sandboxId, ['cat', '/workspace/readme.txt'])).stdout).toBe(
        'changed\n',
      );

      // The change is in the sandbox's delta; the node's cached tree still holds the snapshot's bytes.
      const tree = join(root, 'state', 'blob-cache', 'snapshots', snapshotId);
      expect(await readFile(join(tree, 'readme.txt'), 'utf8')).toBe('hello from the snapshot\n');
      const diff = await call(agent!, token, 'GET', `/v1/sandboxes/${sandboxId}/diff`);
      expect(diff.json['diff']).toContain('+changed');

      const commit = await call(agent!, token, 'POST', `/v1/sandboxes/${sandboxId}/commit`, {});
      expect(commit.status).toBe(409);
      expect(commit.text).toContain('AF_WRONG_STATE');
      expect(await readFile(join(tree, 'readme.txt'), 'utf8')).toBe('hello from the snapshot\n');

      const health = await call(agent!, token, 'GET', '/v1/health');
      expect(health.status).toBe(200);
      const detached = await call(agent!, token, 'DELETE', `/v1/sandboxes/${sandboxId}?dropDelta=true`);
      expect(detached.status).toBe(200);
      expect(await readdir(join(root, 'state', 'blob-cache', 'snapshots'))).toEqual([snapshotId]);
    });

    it('refuses a malformed, an unknown or a doubled source before touching the container', async () => {
      const sandboxId = `sb_${randomUUID()}`;
      const post = (body: object): ReturnType<typeof call> =>
        call(agent!, token, 'POST', '/v1/sandboxes', { sandboxId, rules: RULES, ...body });
      expect((await post({ snapshotId: '../../etc' })).status).toBe(400);
      expect((await post({ snapshotId: 'f'.repeat(64) })).status).toBe(404);
      expect((await post({ snapshotId, codebasePath: join(root, 'codebases', 'x') })).status).toBe(400);
      expect((await post({})).status).toBe(400);
    });
  },
);
