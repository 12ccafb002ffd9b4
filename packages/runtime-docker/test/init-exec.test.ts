// runInitExec (init-exec.ts) when the host's kill through the container's cgroup gives up: the real af-init
// binary, started on the host with its connection on fd 3 (as the protocol's own launcher test does), and a
// container cgroup that reports every kill as given up (what resolveContainerCgroup's killSession says when a
// session still forks after every round, frozen ones included). Before, that answer was ignored: the timed
// out command kept running and nothing said so.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, expect, it, onTestFinished } from 'vitest';
import { LauncherClient, afInitPath } from '@agentfense/launcher';
import { NO_LIMITS } from '@agentfense/protocol';
import type { ContainerCgroup } from '../src/container/cgroup.js';
import { runInitExec } from '../src/launcher/exec.js';

const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
});

async function startInit(): Promise<LauncherClient> {
  const child = spawn(afInitPath(), ['--fd', '3'], { stdio: ['ignore', 'ignore', 'ignore', 'pipe'] });
  children.push(child);
  return LauncherClient.connect(child.stdio[3] as Socket);
}

/** Pids of host processes whose argv contains `marker`. */
async function processesWith(marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const argv = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    const state = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // A zombie waiting for af-init's reap is dead for our purpose.
    if (argv.includes(marker) && !/\) Z /.test(state)) found.push(Number(entry));
  }
  return found;
}

it('a kill the container cgroup gave up on falls back to af-init killing the command, and is reported', async () => {
  const client = await startInit();
  const warnings: string[] = [];
  const logger = { debug: () => undefined, warn: (_obj: object, msg: string) => warnings.push(msg) };
  const gaveUp: ContainerCgroup = {
    oomKills: () => Promise.resolve(null),
    killSession: () => Promise.resolve(false),
  };
  const marker = `af_kill_${randomUUID()}`;
  onTestFinished(async () => {
    // Should the fallback ever break, leave no sleeper behind: af-init's death does not take it along.
    for (const pid of await processesWith(marker)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
  });
  const result = await runInitExec({
    client,
    // Both processes carry the marker: the shell, and the sleep it waits for (argv[0] of `exec -a`).
    argv: ['bash', '-c', `(exec -a "sleep-${marker}" sleep 300); : ${marker}`],
    cwd: '/',
    env: { PATH: '/usr/local/bin:/usr/bin:/bin' },
    timeoutMs: 200,
    audit: { runtime: 'docker', argv: [], limits: NO_LIMITS },
    maxOutputBytes: 1 << 20,
    cgroup: gaveUp,
    watchOom: false,
    logger,
    stopped: () => false,
  });
  expect(result.timedOut).toBe(true);
  // af-init reaped the command before it reported its end: nothing of it is left.
  let left = await processesWith(marker);
  for (let i = 0; i < 100 && left.length > 0; i++) {
    await sleep(20);
    left = await processesWith(marker);
  }
  expect(left, 'processes of the timed-out command survived').toEqual([]);
  expect(warnings).toContain('could not kill every process of a command session in the container');
  client.close();
}, 20_000);
