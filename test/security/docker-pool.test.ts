// Attack: use the docker container pool to reach another sandbox or escape one's limits. A hostile agent
// leaves files in /tmp and HOME and a daemon that left its session, hoping the next sandbox gets the same
// container; or counts on a pooled container keeping the pool's (absent) limits. Defence
// (packages/runtime-docker/src/container/pool.ts, claim.ts): a pooled container serves one sandbox and is removed
// with it, and the claim applies the sandbox's limits before anything runs in it.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import type { RuntimeInstance, RuntimeStartOptions } from '@agentfense/protocol';
import { createDockerRuntime } from '@agentfense/runtime-docker';
import { containersOf, createSharedParent, pooledContainers } from '#helpers/docker.js';
import type { SharedParent } from '#helpers/docker.js';
import { hostProcessesWith } from '../runtime/contract.js';

const docker = inject('docker');
const dockerHost = docker.dockerHost ?? '';
const quiet = { debug: () => undefined, warn: (obj: object, msg: string) => console.warn(msg, obj) };

let parent: Promise<SharedParent> | undefined;
afterAll(async () => {
  if (parent !== undefined) await (await parent).cleanup();
});

describe.skipIf(docker.unavailable !== null)(
  `docker pool: no sandbox inherits another's container or the pool's limits${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    const runtime = createDockerRuntime({
      ...(dockerHost === '' ? {} : { dockerHost }),
      logger: quiet,
      poolSize: 1,
    });
    afterAll(() => runtime.close());

    async function start(
      extra: Partial<RuntimeStartOptions> = {},
    ): Promise<{ sb: RuntimeInstance; id: string }> {
      const fx = await (await (parent ??= createSharedParent())).fixture();
      const sandboxId = `sb_${randomUUID()}`;
      const sb = await runtime.start({ sandboxId, ...fx, ...extra });
      onTestFinished(async () => {
        await sb.stop();
        await fx.cleanup();
      });
      const [id] = await containersOf(dockerHost, sandboxId);
      return { sb, id: id ?? '' };
    }

    it('the next sandbox from the pool sees nothing the previous one left, and has its own limits', async () => {
      const marker = `af_pool_daemon_${randomUUID()}`;
      await start(); // the pool fills for this kind of sandbox
      await runtime.pool.settled();
      const idleBefore = await pooledContainers(dockerHost);
      const a = await start({ resources: { pidsLimit: 500 } });
      expect(idleBefore).toContain(a.id); // served from the pool
      const planted = await a.sb.exec({
        // The daemon says it is up once it runs in its own session: before that, the end of the command
        // would kill it with the command's session.
        command: `echo secret > /tmp/left; echo secret > "$HOME/left"; setsid sh -c 'touch /tmp/up; sleep 1000; : ${marker}' >/dev/null 2>&1 & for i in $(seq 200); do [ -e /tmp/up ] && break; sleep 0.05; done; echo planted`,
      });
      expect(planted.stdout.toString()).toBe('planted\n');
      expect((await hostProcessesWith(marker)).length).toBeGreaterThan(0);
      await a.sb.stop();
      // The daemon died with its container: nothing of A runs anywhere.
      expect(await hostProcessesWith(marker)).toEqual([]);
      await runtime.pool.settled();
      const idle = await pooledContainers(dockerHost);
      expect(idle).not.toContain(a.id); // never returned to the pool
      const b = await start({ resources: { pidsLimit: 40 } });
      expect(idle).toContain(b.id); // B too came from the pool...
      expect(b.id).not.toBe(a.id); // ...but not A's container
      const seen = await b.sb.exec({
        command: `cat /tmp/left "$HOME/left" 2>&1; grep -ls '[${marker[0] ?? 'a'}]${marker.slice(1)}' /proc/[0-9]*/cmdline | wc -l; cat /sys/fs/cgroup/pids/pids.max`,
      });
      expect(seen.stdout.toString()).toBe(
        [
          'cat: /tmp/left: No such file or directory',
          'cat: /home/agent/left: No such file or directory',
          '0',
          '40',
          '',
        ].join('\n'),
      );
    });
  },
);
