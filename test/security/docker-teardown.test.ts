// `agentfense run --runtime docker … -- sleep 300` killed by SIGTERM, SIGINT or SIGKILL,
// then `sandbox destroy`: the container and the agent's processes must not keep running, and destroy must
// really remove the container. Recovery (any later CLI invocation opening the data dir) removes a dead
// run's containers, found by the label of the sandbox's state directory.
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { sandboxProcessesWith } from '../runtime/contract.js';
import { waitForReapers } from '../helpers/reapers.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const demo = `${root}examples/demo-repo`;
const docker = inject('docker');

describe.skipIf(docker.dockerHost === null)(
  `docker sandboxes do not outlive their run (${docker.unavailable ?? 'engine up'})`,
  () => {
    let scratch: string;
    let data: string;
    const env = (): Record<string, string> => ({
      DOCKER_HOST: docker.dockerHost ?? '',
      AGENTFENSE_DATA_DIR: data,
    });
    const containers = async (filter: string): Promise<string[]> =>
      (
        await execa('docker', ['ps', '--all', '--quiet', '--filter', `label=${filter}`], {
          env: { DOCKER_HOST: docker.dockerHost ?? '' },
        })
      ).stdout
        .split('\n')
        .filter(Boolean);
    const sandboxOf = async (container: string): Promise<string> =>
      (
        await execa(
          'docker',
          ['inspect', '--format', '{{index .Config.Labels "io.agentfense.sandbox"}}', container],
          { env: { DOCKER_HOST: docker.dockerHost ?? '' } },
        )
      ).stdout.trim();

    beforeAll(async () => {
      scratch = await mkdtemp(join(tmpdir(), 'af-docker-teardown-'));
      data = join(scratch, 'data');
    });
    afterAll(async () => {
      // Nothing of ours may be left: no mount under the scratch dir, no sandbox container.
      await waitForReapers(data);
      const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
      await rm(scratch, { recursive: true, force: true });
      expect(left).toEqual([]);
      expect(await containers('io.agentfense.sandbox')).toEqual([]);
    });

    /** Starts `run … -- sh -c 'sleep 300; : MARKER'` and waits until its container and process exist. */
    async function startRun(marker: string) {
      const run = execa(
        process.execPath,
        [bin, 'run', demo, '--runtime', 'docker', '--', 'sh', '-c', `sleep 300; : ${marker}`],
        { reject: false, env: env() },
      );
      onTestFinished(() => {
        run.kill('SIGKILL');
      });
      const deadline = Date.now() + 60_000;
      for (;;) {
        const ids = await containers('io.agentfense.sandbox');
        if (ids.length === 1 && (await sandboxProcessesWith(marker)).length > 0) {
          return { run, container: ids[0] ?? '', sandboxId: await sandboxOf(ids[0] ?? '') };
        }
        if (Date.now() > deadline || run.exitCode !== null) {
          run.kill('SIGKILL');
          throw new Error(`the run never started: ${JSON.stringify(await run)}`);
        }
        await sleep(100);
      }
    }

    async function expectGone(container: string, marker: string): Promise<void> {
      // destroy/recovery return only after the container was removed: no waiting for it here.
      expect(await containers(`io.agentfense.sandbox`)).not.toContain(container);
      const deadline = Date.now() + 10_000;
      let survivors = await sandboxProcessesWith(marker);
      while (survivors.length > 0 && Date.now() < deadline) {
        await sleep(50);
        survivors = await sandboxProcessesWith(marker);
      }
      expect(survivors, 'the agent process survived').toEqual([]);
    }

    for (const signal of ['SIGTERM', 'SIGINT', 'SIGKILL'] as const) {
      it(`${signal} to run, then sandbox destroy: the container is removed and its processes are gone`, async () => {
        const marker = `af-teardown-${randomUUID()}`;
        const { run, container, sandboxId } = await startRun(marker);
        run.kill(signal);
        await run;
        // A SIGKILLed run's watchdog starts a reaper that removes the sandbox (packages/control/src/cli/
        // watchdog.ts); while it works, destroy would say the sandbox is in use by it.
        expect(await waitForReapers(data)).toBe(true);
        const destroyed = await execa(process.execPath, [bin, 'sandbox', 'destroy', sandboxId], {
          reject: false,
          env: env(),
        });
        // A run that handled the signal has destroyed its sandbox itself: then destroy says it is unknown.
        if (destroyed.exitCode !== 0) expect(destroyed.stderr).toMatch(/not found|no sandbox/i);
        await expectGone(container, marker);
      });
    }

    it('recovery after a crashed run (SIGKILL) removes the container before anything else is asked', async () => {
      const marker = `af-recover-${randomUUID()}`;
      const { run, container } = await startRun(marker);
      run.kill('SIGKILL');
      await run;
      // The run's reaper (or, had it been killed too, any invocation opening the data dir) recovers the
      // dead run's sandbox.
      expect(await waitForReapers(data)).toBe(true);
      const listed = await execa(process.execPath, [bin, 'sandbox', 'list'], { reject: false, env: env() });
      expect(listed.exitCode).toBe(0);
      await expectGone(container, marker);
    });
  },
);
