// The library's front door on Docker (docs/decisions.md "The library's front door shares one control plane
// per data directory"): the control plane fromLocal opens for a Docker sandbox starts a pooled container at
// once, so the first sandbox of a data directory is served by it, and the next ones by the refilled pool;
// what the plane kept goes when it closes. The engine comes from test/helpers/docker-setup.ts (the test is
// skipped, saying why, without one).
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Sandbox } from '@agentfense/control';
import { containersOf, pooledContainers } from '#helpers/docker.js';
import { assertCleanAndRemove, makeDirs } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

const docker = inject('docker');

describe.skipIf(docker.dockerHost === null)(
  `Sandbox.fromLocal on Docker (${docker.unavailable ?? 'engine up'})`,
  () => {
    const dockerHost = docker.dockerHost ?? '';
    let dirs: TestDirs;
    let saved: string | undefined;

    beforeAll(async () => {
      dirs = await makeDirs();
      saved = process.env.DOCKER_HOST;
      process.env.DOCKER_HOST = dockerHost;
    });
    afterAll(async () => {
      await Sandbox.closeIdle();
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
      expect(await pooledContainers(dockerHost)).toEqual([]);
      await assertCleanAndRemove(dirs);
    });

    it('the first sandbox of a data directory gets a container started when its control plane opened, and the next ones too', async () => {
      for (let i = 0; i < 2; i++) {
        const sb = await Sandbox.fromLocal(dirs.repo, { dataDir: dirs.dataDir, runtime: 'docker' });
        try {
          const r = await sb.run('cat /workspace/README.md; cat /workspace/.env');
          expect(r.stdout).toBe('# demo\n');
          expect(r.stderr).toContain('/workspace/.env: No such file or directory');
          // The audit record says how its container came about: created ahead, then claimed (renamed).
          expect(r.audit.argv.join(' ')).toMatch(
            /^docker run .* && docker rename agentfense-pool-\S+ agentfense-sb_\S+ && /,
          );
        } finally {
          await sb.destroy();
        }
        expect(await containersOf(dockerHost, sb.id)).toEqual([]);
      }
    });
  },
);
