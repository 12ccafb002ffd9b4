// The runtime contract against bubblewrap (a plain tmp directory as the workspace: the contract does not
// need the FUSE mount), plus what only bwrap has: install hints, the argv builder against real bwrap,
// cgroup placement and cleanup, and no workspace relay left behind (exec latency is `pnpm bench:sandbox`'s).
import { randomUUID } from 'node:crypto';
import { access, chown, mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { describe, expect, it, onTestFinished } from 'vitest';
import { UnavailableError } from '@agentfense/protocol';
import type { RuntimeInstance } from '@agentfense/protocol';
import {
  DEFAULT_RUN_DIR,
  buildBwrapArgs,
  createBwrapRuntime,
  prepareSandboxEtc,
  resolveSystemMounts,
} from '@agentfense/runtime-bwrap';
import type { WorkspaceFixture } from './contract.js';
import { expectNoProcessWith, hostProcessesWith, runRuntimeContract } from './contract.js';
import { cgroupLeftovers, makeFixture, quiet } from '../helpers/bwrap-fixtures.js';

const CGROUP_ROOT = '/sys/fs/cgroup';

/** Waits until a host process carries `marker` (a command just spawned). */
async function waitForProcess(marker: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await hostProcessesWith(marker)).length === 0) {
    if (Date.now() > deadline) throw new Error(`no process with ${marker} started`);
    await sleep(20);
  }
}

// A bwrap per command here; test/runtime/bwrap-launcher.test.ts runs the same suite through the launcher.
runRuntimeContract({
  name: 'bwrap',
  makeRuntime: (extra = {}) => createBwrapRuntime({ logger: quiet, execLauncher: false, ...extra }),
  workspace: makeFixture,
  leftovers: cgroupLeftovers,
});

describe('bwrap only', () => {
  async function start(resources?: {
    memoryBytes?: number;
    pidsLimit?: number;
    cpuQuota?: number;
    cpuShares?: number;
  }): Promise<{ sb: RuntimeInstance; sandboxId: string; fixture: WorkspaceFixture }> {
    const fixture = await makeFixture();
    const sandboxId = `sb_${randomUUID()}`;
    const sb = await createBwrapRuntime({ logger: quiet }).start({
      sandboxId,
      workspaceHostPath: fixture.workspaceHostPath,
      stateDir: fixture.stateDir,
      ...(resources === undefined ? {} : { resources }),
    });
    onTestFinished(async () => {
      await sb.stop();
      expect(await cgroupLeftovers(sandboxId)).toEqual([]);
      await fixture.cleanup();
    });
    return { sb, sandboxId, fixture };
  }

  it('a kill or timeout right after start never leaves the sandbox running (the die-with-parent race)', async () => {
    // bwrap killed before its child armed PR_SET_PDEATHSIG used to leave the whole namespace alive, so
    // kill() and short timeouts hung forever under load. Hit that window many times.
    const { sb } = await start();
    const marker = `af_race_${randomUUID()}`;
    const sleeper = `sh -c 'sleep 1000; : ${marker}' & sh -c 'sleep 1000; : ${marker}'`;
    const within = <T>(p: Promise<T>, what: string): Promise<T> =>
      Promise.race([
        p,
        sleep(15_000).then(() => {
          throw new Error(`${what} did not finish within 15 s`);
        }),
      ]);
    for (let i = 0; i < 15; i++) {
      const proc = await sb.spawn({ argv: ['sh', '-c', sleeper] });
      await within(proc.kill(), `kill() #${i}`);
      const result = await within(sb.exec({ command: sleeper, timeoutMs: 1 + (i % 5) }), `timeout #${i}`);
      expect(result.timedOut).toBe(true);
    }
    await expectNoProcessWith(marker);
  });

  it('recovery searches for processes only while a sandbox may have some, and kills what a vanished control plane left', async () => {
    // The search reads every host process's /proc entries; it runs before each start and after each stop,
    // so it is skipped for a state directory that is empty (a fresh sandbox, or one stopped cleanly).
    // The control plane's layout: the state directory is <sandboxes>/<id>/state (recovery knows the
    // sandbox's cgroups by that id).
    const fixture = await makeFixture();
    const sandboxId = `sb_${randomUUID()}`;
    const stateDir = join(fixture.stateDir, sandboxId, 'state');
    await mkdir(stateDir, { recursive: true });
    const sb = await createBwrapRuntime({ logger: quiet }).start({
      sandboxId,
      workspaceHostPath: fixture.workspaceHostPath,
      stateDir,
      resources: { pidsLimit: 64 },
    });
    onTestFinished(async () => {
      await sb.stop();
      expect(await cgroupLeftovers(sandboxId)).toEqual([]);
      await fixture.cleanup();
    });
    const mark = join(stateDir, 'bwrap-running');
    await access(mark); // written by start(), before any command can run
    const marker = `af_left_${randomUUID()}`;
    await sb.spawn({ argv: ['sh', '-c', `sleep 1000; : ${marker}`] });
    await waitForProcess(marker);
    // Another process's runtime, as recovery after a SIGKILLed control plane would run it.
    await createBwrapRuntime({ logger: quiet }).clearLeftovers(stateDir);
    await expectNoProcessWith(marker);
    await sb.stop();
    await expect(access(mark)).rejects.toThrow(/ENOENT/);
  });

  it('a state directory removed under a running sandbox leaves no workspace relay mounted after stop', async () => {
    // The relay (a bind of the workspace's parent under the run directory) was found by the record in the
    // state directory alone; a data directory deleted by hand, or a teardown racing a start, left it.
    const { sb, sandboxId, fixture } = await start();
    const relay = join(DEFAULT_RUN_DIR, sandboxId);
    const mounted = async (): Promise<boolean> =>
      (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').some((l) => l.split(' ')[4] === relay);
    expect(await mounted()).toBe(true);
    await rm(fixture.stateDir, { recursive: true, force: true });
    await sb.stop();
    expect(await mounted()).toBe(false);
    await expect(access(relay)).rejects.toThrow(/ENOENT/);
  });

  it('reports a missing bwrap as UnavailableError saying how to install it, from check() and start()', async () => {
    const runtime = createBwrapRuntime({ bwrapPath: '/nonexistent/bwrap', logger: quiet });
    await expect(runtime.check()).rejects.toThrow(UnavailableError);
    await expect(runtime.check()).rejects.toThrow(/apt-get install bubblewrap/);
    const fixture = await makeFixture();
    onTestFinished(() => fixture.cleanup());
    await expect(
      runtime.start({
        sandboxId: 'sb_missing',
        workspaceHostPath: fixture.workspaceHostPath,
        stateDir: fixture.stateDir,
      }),
    ).rejects.toThrow(/apt-get install bubblewrap/);
  });

  it('the argv builder output runs under real bwrap with the promised view of the system', async () => {
    const fixture = await makeFixture();
    onTestFinished(() => fixture.cleanup());
    // bwrap runs as this process here (root): the workspace is ours, not the sandbox user's.
    await chown(fixture.workspaceHostPath, process.getuid?.() ?? 0, process.getgid?.() ?? 0);
    const etcDir = join(fixture.stateDir, 'etc');
    await prepareSandboxEtc({ dir: etcDir, logger: quiet });
    const args = buildBwrapArgs({
      workspaceHostPath: fixture.workspaceHostPath,
      systemMounts: await resolveSystemMounts({ etcDir }),
      command: [
        'sh',
        '-c',
        [
          'hostname',
          'id -un',
          'test -e /etc/shadow && echo shadow-visible',
          'test -e /etc/npmrc && echo npmrc-visible',
          'touch /usr/af-probe 2>/dev/null && echo usr-writable',
          'touch /etc/af-probe 2>/dev/null && echo etc-writable',
          'ls -A /tmp',
          'touch /workspace/ok && echo workspace-writable',
          'unshare -U true 2>/dev/null && echo nested-userns',
          'test -e /root && echo root-visible',
          'test -e /home && echo home-visible',
        ].join('; '),
      ],
    });
    const r = await execa('bwrap', args, { reject: false, env: {}, extendEnv: false, stdin: 'ignore' });
    expect(r.stderr).toBe('');
    expect(r.stdout.split('\n')).toEqual(['agentfense', 'agent', 'home', 'workspace-writable']);
  });

  it('places every process of a command in the sandbox cgroups before it runs, with the limits written', async () => {
    const { sb, sandboxId } = await start({
      memoryBytes: 128 * 1024 * 1024,
      pidsLimit: 50,
      cpuQuota: 50_000,
      cpuShares: 512,
    });
    expect(sb.limits).toEqual({
      memoryBytes: 128 * 1024 * 1024,
      pidsLimit: 50,
      cpuQuota: 50_000,
      cpuShares: 512,
      mechanism: 'cgroup-v1',
    });
    const dir = (h: string): string => join(CGROUP_ROOT, h, 'agentfense', sandboxId);
    expect((await readFile(join(dir('memory'), 'memory.limit_in_bytes'), 'utf8')).trim()).toBe(
      String(128 * 1024 * 1024),
    );
    expect((await readFile(join(dir('pids'), 'pids.max'), 'utf8')).trim()).toBe('50');
    expect((await readFile(join(dir('cpu'), 'cpu.cfs_quota_us'), 'utf8')).trim()).toBe('50000');
    expect((await readFile(join(dir('cpu'), 'cpu.shares'), 'utf8')).trim()).toBe('512');

    const marker = `af_cg_${randomUUID()}`;
    const running = sb.exec({ command: `sh -c 'sleep 1000; : ${marker}' & wait`, timeoutMs: 20_000 });
    const deadline = Date.now() + 10_000;
    let pids: number[] = [];
    while (pids.length < 4 && Date.now() < deadline) {
      pids = await hostProcessesWith(marker);
      if (pids.length < 4) await sleep(20);
    }
    // The marker is in the argv of the outer bwrap (our child: a monitor that never forks the command and
    // stays outside on purpose), of bwrap's pid 1, of the shell and of the sleeper: all but the first must
    // be in every cgroup. Through the launcher (execLauncher) only the shell and the sleeper carry it.
    const parentOf = async (pid: number): Promise<number> =>
      Number(/^PPid:\s+(\d+)$/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1]);
    const inside: number[] = [];
    for (const pid of pids) if ((await parentOf(pid)) !== process.pid) inside.push(pid);
    expect(inside.length).toBeGreaterThanOrEqual(2);
    for (const hierarchy of ['memory', 'pids', 'cpu', 'freezer']) {
      const procs = (await readFile(join(dir(hierarchy), 'cgroup.procs'), 'utf8')).split('\n').map(Number);
      for (const pid of inside) expect(procs).toContain(pid);
    }
    await sb.stop();
    expect((await running).exitCode === 0).toBe(false);
  });
});
