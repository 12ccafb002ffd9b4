// Docker sandboxes run under a host uid of their own too (per-sandbox-uid.test.ts is the bwrap side),
// whether the container was started for the sandbox or taken from the pool (whose idle containers lease a
// uid each when they are created; the sandbox that takes one takes its uid). When every docker sandbox ran
// as uid 2000000000, one that held every inotify instance (fs.inotify.max_user_instances) left every
// other docker sandbox of the host none.
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { closePlane, makeDirs, waitFor } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';
import { hostUidsOf, waitForHostProcesses } from '../helpers/host-processes.js';

const docker = inject('docker');

/** perl in the base image: inotify_init1 (x86-64 nr 294) until the kernel refuses, then hold them. */
const EXHAUST =
  `perl -e 'my $n = 0; $n++ while syscall(294, 0) >= 0; my $e = $! + 0; ` +
  `open(my $f, ">", "/tmp/held.tmp"); print $f "$n $e"; close($f); rename("/tmp/held.tmp", "/tmp/held"); sleep 60'`;
const TAKE_ONE = `perl -e 'print syscall(294, 0) >= 0 ? "inotify ok\\n" : "inotify $!\\n"'`;

describe.skipIf(docker.unavailable !== null)(
  `docker sandboxes have host uids of their own, pooled or not${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    let dirs: TestDirs;
    let cp: ControlPlane;
    let fresh: string;
    let pooled: string;
    const running: Promise<unknown>[] = [];
    const savedHost = process.env['DOCKER_HOST'];

    beforeAll(async () => {
      process.env['DOCKER_HOST'] = docker.dockerHost ?? '';
      dirs = await makeDirs();
      cp = await ControlPlane.open({ dataDir: dirs.dataDir, dockerPoolSize: 1 });
      const { id: codebaseId } = await cp.linkCodebase({ path: dirs.repo });
      ({ id: fresh } = await cp.createSandbox({ codebaseId, preset: 'agent-safe', runtime: 'docker' }));
      await cp.startSandbox(fresh);
      // The first start makes the pool fill; a start while it is still filling gets a fresh container.
      const poolDir = join(dirs.dataDir, 'docker-pool');
      for (let attempt = 0; ; attempt++) {
        await waitFor('an idle pooled container', async () => {
          const owners = await readdir(poolDir).catch(() => [] as string[]);
          for (const owner of owners) {
            const entries = await readdir(join(poolDir, owner)).catch(() => [] as string[]);
            if (entries.some((e) => e.startsWith('slot-'))) return true;
          }
          return undefined;
        });
        ({ id: pooled } = await cp.createSandbox({ codebaseId, preset: 'agent-safe', runtime: 'docker' }));
        await cp.startSandbox(pooled);
        const scratch = join(cp.layout.sandbox(pooled).state, 'docker');
        if ((await readdir(scratch)).some((n) => n.startsWith('pooled-'))) break;
        if (attempt === 10) throw new Error('no sandbox was served from the pool');
        await cp.destroySandbox(pooled);
        await sleep(500);
      }
    }, 180_000);

    afterAll(async () => {
      await Promise.all(running);
      await closePlane(cp, dirs);
      if (savedHost === undefined) delete process.env['DOCKER_HOST'];
      else process.env['DOCKER_HOST'] = savedHost;
    }, 120_000);

    const recorded = async (id: string): Promise<number> =>
      Number((await readFile(cp.layout.sandbox(id).hostUser, 'utf8')).split(':')[0]);

    it("a fresh and a pooled container run under different uids, each its sandbox's, no host account's", async () => {
      const marker = `af-docker-per-uid-${String(process.pid)}`;
      running.push(
        cp.run(fresh, `sleep 15; : ${marker}-fresh`, { timeoutMs: 30_000 }).catch(() => undefined),
      );
      running.push(
        cp.run(pooled, `sleep 15; : ${marker}-pooled`, { timeoutMs: 30_000 }).catch(() => undefined),
      );
      const uidsFresh = hostUidsOf(await waitForHostProcesses(`${marker}-fresh`));
      const uidsPooled = hostUidsOf(await waitForHostProcesses(`${marker}-pooled`));
      expect([...uidsFresh]).toEqual([await recorded(fresh)]);
      expect([...uidsPooled]).toEqual([await recorded(pooled)]);
      expect(await recorded(fresh)).not.toBe(await recorded(pooled));
      const passwd = await readFile('/etc/passwd', 'utf8');
      for (const uid of [...uidsFresh, ...uidsPooled]) {
        expect(uid).toBeGreaterThan(2_000_000_000);
        expect(passwd.split('\n').some((line) => line.split(':')[2] === String(uid))).toBe(false);
      }
      // Inside, the user is still the container's user, owner of what the sandbox sees.
      const r = await cp.run(pooled, 'stat -c %u /workspace/README.md; id -u');
      expect(r.stdout).toBe(`${String(await recorded(pooled))}\n`.repeat(2));
    }, 60_000);

    it('one docker sandbox holding every inotify instance leaves the other its own', async () => {
      running.push(cp.run(fresh, EXHAUST, { timeoutMs: 90_000 }).catch(() => undefined));
      let held = '';
      for (let i = 0; i < 600 && held === ''; i++) {
        held = (await cp.run(fresh, 'cat /tmp/held 2>/dev/null || true')).stdout;
        if (held === '') await sleep(100);
      }
      const [instances, errno] = held.split(' ');
      expect(Number(instances), held).toBeGreaterThan(0);
      expect(errno, `EMFILE is 24: ${held}`).toBe('24');
      const r = await cp.run(pooled, TAKE_ONE);
      expect(r.stdout).toBe('inotify ok\n');
      await cp.stopSandbox(fresh);
    }, 120_000);
  },
);
