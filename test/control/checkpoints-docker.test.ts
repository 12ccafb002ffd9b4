// Checkpoints on Docker sandboxes: a running container's shell sees a restore at once (its /workspace is
// the same FUSE mount, propagated into the container), and a fork runs in a container of its own with the
// checkpoint's files. The engine comes from test/helpers/docker-setup.ts (skipped, saying why, without one).
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { containersOf } from '#helpers/docker.js';
import { assertCleanAndRemove, destroyAllAndClose, makeDirs } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

const docker = inject('docker');

describe.skipIf(docker.dockerHost === null)(
  `checkpoints on Docker (${docker.unavailable ?? 'engine up'})`,
  () => {
    const dockerHost = docker.dockerHost ?? '';
    let dirs: TestDirs;
    let cp: ControlPlane;
    let saved: string | undefined;

    beforeAll(async () => {
      dirs = await makeDirs();
      saved = process.env.DOCKER_HOST;
      process.env.DOCKER_HOST = dockerHost;
      cp = await ControlPlane.open({ dataDir: dirs.dataDir, dockerPoolSize: 0 });
    });
    afterAll(async () => {
      await destroyAllAndClose(cp);
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
      await assertCleanAndRemove(dirs);
    });

    it('restores under a running shell and forks into a container of its own', async () => {
      const codebaseId = (await cp.linkCodebase({ path: dirs.repo })).id;
      const { id } = await cp.createSandbox({ codebaseId, preset: 'full-access', runtime: 'docker' });
      await cp.startSandbox(id);
      const session = await cp.createSession(id);
      await session.exec('cd /workspace/output && echo before > f.txt');
      const base = await cp.checkpoint(id);
      await session.exec('echo after > f.txt && rm /workspace/README.md');
      await cp.restoreCheckpoint(id, base.id);
      expect(String((await session.exec('cat f.txt /workspace/README.md')).stdout)).toBe('before\n# demo\n');
      const [fork] = await cp.forkSandbox(id, { checkpointId: base.id });
      const forkId = fork?.id as string;
      expect(fork?.runtime).toBe('docker');
      expect((await cp.run(forkId, 'cat /workspace/output/f.txt')).stdout).toBe('before\n');
      await cp.run(forkId, 'echo fork > /workspace/output/f.txt');
      expect(String((await session.exec('cat f.txt')).stdout)).toBe('before\n');
      expect(await containersOf(dockerHost, forkId)).toHaveLength(1);
      await cp.closeSession(session.id);
      await cp.destroySandbox(forkId);
      await cp.destroySandbox(id);
      expect(await containersOf(dockerHost, forkId)).toEqual([]);
    });
  },
);
