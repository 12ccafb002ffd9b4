// The docker runtime through the product's front doors: `agentfense run --runtime docker` and the library,
// with a real engine (started by test/helpers/docker-setup.ts) and a real worker mount. The container's
// user (a dedicated uid) owns what it sees, the rules hold, and a crashed worker is remounted under the running
// container.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Sandbox } from '@agentfense/control';
import { listMounts } from '@agentfense/fuse-worker';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const demo = `${root}examples/demo-repo`;
const docker = inject('docker');

describe.skipIf(docker.dockerHost === null)(
  `docker runtime end to end (${docker.unavailable ?? 'engine up'})`,
  () => {
    let scratch: string;
    const env = { DOCKER_HOST: docker.dockerHost ?? '' };

    beforeAll(async () => {
      scratch = await mkdtemp(join(tmpdir(), 'af-docker-run-'));
    });
    afterAll(async () => {
      // The library's control plane stays open a while after its last sandbox, with pooled containers.
      await Sandbox.closeIdle();
      const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
      await rm(scratch, { recursive: true, force: true });
      expect(left).toEqual([]);
      const containers = await execa('docker', ['ps', '-aq', '--filter', 'label=io.agentfense.sandbox'], {
        env,
      });
      expect(containers.stdout).toBe('');
    });

    const agentfense = (args: string[]) =>
      execa(process.execPath, [bin, ...args, '--data', join(scratch, 'data')], { reject: false, env });

    it("runs as the sandbox's own leased uid over the permission view: secrets hidden, src read-only, output writable", async () => {
      const r = await agentfense([
        'run',
        demo,
        '--runtime',
        'docker',
        '--diff',
        '--',
        'sh',
        '-c',
        'id -u; ls /workspace; cat /workspace/.env; echo x >> /workspace/src/app.py; echo ok > /workspace/output/d.txt && cat /workspace/output/d.txt; exit 4',
      ]);
      expect(r.exitCode).toBe(4);
      // A uid of the leased range (2,000,000,001 and up), not the runtime's fixed 2000000000.
      expect(r.stdout).toMatch(/^20000\d{5}\nREADME.md\nconfig\ndocs\noutput\nsrc\nok\n/);
      expect(r.stdout.split('\n')[0]).not.toBe('2000000000');
      expect(r.stderr).toContain('/workspace/.env: No such file or directory');
      expect(r.stderr).toContain('/workspace/src/app.py: Permission denied');
      expect(r.stdout).toContain('+++ b/output/d.txt');
    });

    it('has no network by default', async () => {
      const r = await agentfense(['run', demo, '--runtime', 'docker', '--', 'sh', '-c', 'ls /sys/class/net']);
      expect(r.stdout.trim()).toBe('lo');
    });

    it('a missing image fails with a clear error (status 1)', async () => {
      const r = await agentfense([
        'run',
        demo,
        '--runtime',
        'docker',
        '--image',
        'agentfense/missing:none',
        '--',
        'true',
      ]);
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toContain('image agentfense/missing:none is not available in the Docker engine');
    });

    it('an image with the bwrap runtime is refused as invalid input', async () => {
      const r = await agentfense(['run', demo, '--image', 'debian:12', '--', 'true']);
      expect(r.exitCode).toBe(2);
      expect(r.stderr).toMatch(
        /image applies to runtimes that run images, like docker \(this sandbox uses bwrap\)/,
      );
    });

    it('a worker killed with SIGKILL is remounted under the running container', async () => {
      const saved = process.env.DOCKER_HOST;
      process.env.DOCKER_HOST = docker.dockerHost ?? '';
      const sb = await Sandbox.fromLocal(demo, { runtime: 'docker', dataDir: join(scratch, 'lib') });
      try {
        expect((await sb.run('cat /workspace/README.md')).exitCode).toBe(0);
        const pid = (await sb.info()).workerPid;
        expect(pid).not.toBeNull();
        process.kill(pid ?? 0, 'SIGKILL');
        // Supervision notices within seconds; the next commands see /workspace again.
        let seen = '';
        for (let i = 0; i < 40 && !seen.includes('demo-repo'); i++) {
          await new Promise((done) => setTimeout(done, 250));
          seen = (await sb.run('head -1 /workspace/README.md')).stdout;
        }
        expect(seen).toContain('demo-repo');
        expect((await sb.info()).restartCount).toBeGreaterThanOrEqual(1);
      } finally {
        await sb.destroy();
        if (saved === undefined) delete process.env.DOCKER_HOST;
        else process.env.DOCKER_HOST = saved;
      }
    });
  },
);
