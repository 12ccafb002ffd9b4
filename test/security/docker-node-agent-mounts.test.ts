// Attack: a hostile sandbox image (the container is unprivileged but its image and first process are not
// trusted) prepares its filesystem so that the root node agent's mounts land somewhere else: /workspace or
// /.agentfense as a symlink to a directory the container relies on (/etc, /bin), or /workspace already a
// mount of the container's own (a tmpfs) that would hide the view. Defence (packages/node-agent/native/
// af-mountns.c): the mount point is one name under the container's root, opened with openat2
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_BENEATH, so the attach is refused and nothing is mounted
// anywhere in the container; the agent then undoes what it started (worker, host mount).
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import {
  call,
  createSandboxContainer,
  randomToken,
  removeContainer,
  startAgent,
  type AgentProcess,
} from '#helpers/node-agent.js';

const docker = inject('docker');
const dockerHost = docker.dockerHost ?? '';

describe.skipIf(docker.unavailable !== null)(
  `node agent: a hostile image cannot redirect the view's mounts${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    let root: string;
    let agent: AgentProcess;
    const token = randomToken();
    const containers: string[] = [];

    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'af-node-agent-mnt-'));
      await mkdir(join(root, 'codebases', 'app'), { recursive: true });
      await writeFile(join(root, 'codebases', 'app', 'readme.txt'), 'codebase\n');
      agent = await startAgent({
        stateDir: join(root, 'state'),
        codebaseRoot: join(root, 'codebases'),
        token,
        tokenFile: join(root, 'token'),
        dockerHost,
      });
    });

    afterAll(async () => {
      await agent?.stop();
      for (const id of containers) await removeContainer(dockerHost, id);
      await rm(root, { recursive: true, force: true });
    });

    /** The container's mount table, read from the host through its init. */
    async function containerMounts(id: string): Promise<string> {
      const env = dockerHost === '' ? {} : { DOCKER_HOST: dockerHost };
      const pid = (
        await execa('docker', ['inspect', '--format', '{{.State.Pid}}', id], { env })
      ).stdout.trim();
      return readFile(`/proc/${pid}/mountinfo`, 'utf8');
    }

    const cases: [string, string][] = [
      ['/workspace a symlink to /etc', 'rm -rf /workspace; ln -s /etc /workspace'],
      ['/.agentfense a symlink to /bin', 'mkdir -p /workspace; rm -rf /.agentfense; ln -s /bin /.agentfense'],
      ['/workspace a symlink through a relative path', 'rm -rf /workspace; ln -s ../../../usr /workspace'],
    ];
    for (const [name, prelude] of cases) {
      it(`refuses to attach when the image made ${name}`, async () => {
        const sandboxId = `sb_${randomUUID()}`;
        const id = await createSandboxContainer(dockerHost, sandboxId, prelude);
        containers.push(id);
        // The prelude has run once the wait loop is pid 1's program (its exec replaced the prelude shell).
        const env = dockerHost === '' ? {} : { DOCKER_HOST: dockerHost };
        let prepared = false;
        for (let i = 0; i < 50 && !prepared; i++) {
          const probe = ['sh', '-c', 'test -L /workspace || test -L /.agentfense'];
          prepared = (await execa('docker', ['exec', id, ...probe], { env, reject: false })).exitCode === 0;
          if (!prepared) await new Promise((r) => setTimeout(r, 100));
        }
        expect(prepared).toBe(true);
        const r = await call(agent, token, 'POST', '/v1/sandboxes', {
          sandboxId,
          codebasePath: join(root, 'codebases', 'app'),
          rules: [{ pattern: '**', permission: 'write' }],
        });
        expect(r.status, r.text).toBe(503);
        expect(r.text).toContain('opening the mount point in the container');
        // Nothing of the agent's is mounted in the container (no FUSE view, no launcher directory) …
        const mounts = await containerMounts(id);
        expect(mounts).not.toContain('fuse');
        expect(mounts).not.toContain(join(root, 'state'));
        // … nor left on the host, and no worker of it runs.
        expect((await listMounts()).filter((m) => m.mountpoint.startsWith(root))).toEqual([]);
        expect((await call(agent, token, 'GET', '/v1/health')).json['sandboxes']).toEqual([]);
        const dir = join(root, 'state', 'sandboxes', sandboxId);
        expect((await readdir(dir)).filter((e) => e.startsWith('launcher-'))).toEqual([]);
      });
    }
  },
);
