// The bwrap runtime's per-sandbox launcher (runtime-bwrap launcher.ts, option `execLauncher`): one bwrap
// per sandbox runs af-init as its pid 1 and every exec is a SPAWN request to it. The runtime contract
// suite runs against it too (the second runRuntimeContract below); this file holds what only the launcher
// can get wrong: commands sharing one pid namespace, the host-side kill of what a command left behind
// (including processes that left its session), a launcher that dies, and what the launcher itself exposes.
import { randomUUID } from 'node:crypto';
import { chmod, chown, readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { RuntimeInstance } from '@agentfense/protocol';
import { createBwrapRuntime } from '@agentfense/runtime-bwrap';
import { expectNoProcessWith, hostProcessesWith, runRuntimeContract } from './contract.js';
import { cgroupLeftovers, makeFixture, quiet } from '../helpers/bwrap-fixtures.js';

const launcherRuntime = (extra = {}) => createBwrapRuntime({ logger: quiet, execLauncher: true, ...extra });

runRuntimeContract({
  name: 'bwrap',
  makeRuntime: launcherRuntime,
  workspace: makeFixture,
  leftovers: cgroupLeftovers,
});

/** Waits until at least `count` host processes carry `marker`. */
async function waitForProcesses(marker: string, count = 1): Promise<number[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const pids = await hostProcessesWith(marker);
    if (pids.length >= count) return pids;
    if (Date.now() > deadline) throw new Error(`fewer than ${count} processes with ${marker} started`);
    await sleep(20);
  }
}

async function ppidOf(pid: number): Promise<number> {
  return Number(/^PPid:\s+(\d+)$/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1]);
}

const AF_INIT_CMDLINE = '/.agentfense/af-init\0--fd\x007\0';

/** The host pid of the af-init whose command carries `marker` (the marked command's root is its child). */
async function afInitOf(marker: string): Promise<{ afInit: number; command: number }> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    for (const pid of await hostProcessesWith(marker)) {
      const parent = await ppidOf(pid).catch(() => 0);
      const cmdline = await readFile(`/proc/${parent}/cmdline`, 'utf8').catch(() => '');
      if (cmdline === AF_INIT_CMDLINE) return { afInit: parent, command: pid };
    }
    if (Date.now() > deadline) throw new Error(`no command with ${marker} under an af-init`);
    await sleep(20);
  }
}

describe('bwrap launcher only', () => {
  async function start(
    extra: { env?: Record<string, string>; resources?: { memoryBytes?: number; pidsLimit?: number } } = {},
  ): Promise<RuntimeInstance> {
    const fixture = await makeFixture();
    const sandboxId = `sb_${randomUUID()}`;
    const sb = await launcherRuntime().start({
      sandboxId,
      workspaceHostPath: fixture.workspaceHostPath,
      stateDir: fixture.stateDir,
      ...extra,
    });
    onTestFinished(async () => {
      await sb.stop();
      expect(await cgroupLeftovers(sandboxId)).toEqual([]);
      await fixture.cleanup();
    });
    return sb;
  }

  it('starts while the worker is still mounting: a bare mount point the sandbox user cannot enter does not stop af-init', async () => {
    // The launcher starts with the sandbox, often before the worker's mount exists; /workspace is then the
    // bare mount point, root's and 0700. A launcher that chdir'd there failed before READY (seen in bench).
    const fixture = await makeFixture();
    await chown(fixture.workspaceHostPath, 0, 0);
    await chmod(fixture.workspaceHostPath, 0o700);
    const sandboxId = `sb_${randomUUID()}`;
    const sb = await launcherRuntime().start({
      sandboxId,
      workspaceHostPath: fixture.workspaceHostPath,
      stateDir: fixture.stateDir,
    });
    onTestFinished(async () => {
      await sb.stop();
      await fixture.cleanup();
    });
    const early = await sb.exec({ command: 'pwd', cwd: '/tmp' });
    expect(early.stderr.toString()).toBe('');
    expect(early.stdout.toString()).toBe('/tmp\n');
    // The mount point becomes the sandbox's (as the worker's mount root is): /workspace works in the same
    // launcher, and is every command's default cwd.
    const owner = createBwrapRuntime({ logger: quiet }).traits.hostOwner;
    if (owner !== null) await chown(fixture.workspaceHostPath, owner.uid, owner.gid);
    await chmod(fixture.workspaceHostPath, 0o755);
    const later = await sb.exec({ command: 'pwd; echo $PPID' });
    expect(later.stdout.toString()).toBe('/workspace\n1\n');
  });

  it('runs every exec under one af-init (pid 1) that holds no sandbox variable and no host path', async () => {
    const sb = await start({ env: { SECRET_TOKEN: 'hunter2' } });
    const first = await sb.exec({ command: 'tr "\\0" " " < /proc/1/cmdline; echo; echo $SECRET_TOKEN' });
    expect(first.stdout.toString()).toBe('/.agentfense/af-init --fd 7 \nhunter2\n');
    // The same pid 1 for the next command: its start time (field 22 of stat) did not change.
    const stat = 'cut -d" " -f22 /proc/1/stat';
    expect((await sb.exec({ command: stat })).stdout.toString()).toBe(
      (await sb.exec({ command: stat })).stdout.toString(),
    );
    const environ = await sb.exec({ command: 'tr "\\0" "\\n" < /proc/1/environ' });
    expect(environ.stdout.toString()).not.toContain('hunter2');
    const mountinfo = (await sb.exec({ command: 'cat /proc/self/mountinfo' })).stdout.toString();
    expect(mountinfo).toContain(' /.agentfense/af-init ');
    expect(mountinfo).not.toContain('packages/protocol');
    // Each command still has the sandbox's defences: uid 1000, no capabilities, the seccomp filter.
    const who = await sb.exec({ command: 'id -u; grep -E "^(CapEff|Seccomp):" /proc/self/status' });
    expect(who.stdout.toString()).toMatch(/^1000\nCapEff:\s+0+\nSeccomp:\s+2\n$/);
    // /tmp belongs to the sandbox now, not to one command (as in a Docker sandbox).
    await sb.exec({ command: 'echo kept > /tmp/f' });
    expect((await sb.exec({ command: 'cat /tmp/f' })).stdout.toString()).toBe('kept\n');
  });

  it('a command can neither ptrace af-init nor reach its connection, descriptors or environment', async () => {
    const sb = await start({ env: { SECRET_TOKEN: 'hunter2' } });
    const r = await sb.exec({
      command: [
        'ls /proc/1/fd >/dev/null 2>&1 && echo fds-listed',
        'cat /proc/1/environ >/dev/null 2>&1 && echo environ-read',
        'cat /proc/1/mem >/dev/null 2>&1 && echo mem-read',
        // PTRACE_ATTACH (16) and PTRACE_SEIZE (0x4206) of pid 1: -1 (EPERM) for a process that is not dumpable.
        'python3 -c "import ctypes; libc = ctypes.CDLL(None); print(libc.ptrace(16, 1, 0, 0), libc.ptrace(0x4206, 1, 0, 0))"',
        // The command's own processes stay traceable (strace, gdb).
        'python3 -c "import ctypes, os, time\nlibc = ctypes.CDLL(None)\npid = os.fork()\nif pid == 0:\n  time.sleep(5)\n  os._exit(0)\nprint(libc.ptrace(0x4206, pid, 0, 0))\nos.kill(pid, 9)"',
      ].join('\n'),
    });
    expect(r.stdout.toString()).toBe('-1 -1\n0\n');
  });

  it('a command cannot kill af-init from inside, and a new command still runs', async () => {
    const sb = await start();
    const r = await sb.exec({ command: 'kill -KILL 1; kill -STOP 1; echo sent' });
    expect(r.stdout.toString()).toBe('sent\n');
    expect((await sb.exec({ command: 'echo alive' })).stdout.toString()).toBe('alive\n');
  });

  it('kills what a command left behind even after setsid and a double fork', async () => {
    const sb = await start();
    const marker = `af_escape_${randomUUID()}`;
    const r = await sb.exec({
      command: [
        `setsid sh -c 'sleep 1000; : ${marker}' </dev/null >/dev/null 2>&1 &`,
        `(setsid sh -c '(sh -c "sleep 1000; : ${marker}" &); sleep 1000; : ${marker}' </dev/null >/dev/null 2>&1 &)`,
        `sh -c 'sleep 1000; : ${marker}' </dev/null >/dev/null 2>&1 &`,
        'sleep 0.3; echo left',
      ].join('\n'),
    });
    expect(r.stdout.toString()).toBe('left\n');
    await expectNoProcessWith(marker);
  });

  it('a timeout kills the tree including what left the session', async () => {
    const sb = await start();
    const marker = `af_escape_timeout_${randomUUID()}`;
    const r = await sb.exec({
      command: `setsid sh -c 'sleep 1000; : ${marker}' </dev/null >/dev/null 2>&1 & sh -c 'sleep 1000; : ${marker}'`,
      timeoutMs: 800,
    });
    expect(r.timedOut).toBe(true);
    expect(r.signal).toBe('SIGKILL');
    await expectNoProcessWith(marker);
  });

  it("one command's end leaves a concurrent command and its background jobs running", async () => {
    const sb = await start();
    const marker = `af_concurrent_${randomUUID()}`;
    const controller = new AbortController();
    const long = sb.exec({
      command: `sh -c 'sleep 1000; : ${marker}' & sh -c 'sleep 1000; : ${marker}'`,
      signal: controller.signal,
    });
    const before = await waitForProcesses(marker, 2);
    for (let i = 0; i < 3; i++) expect((await sb.exec({ command: 'sleep 1000 & true' })).exitCode).toBe(0);
    expect((await hostProcessesWith(marker)).sort()).toEqual(before.sort());
    controller.abort();
    expect((await long).cancelled).toBe(true);
    await expectNoProcessWith(marker);
  });

  it('a launcher killed from the host ends its commands as killed, and the next exec gets a new one', async () => {
    const sb = await start({ resources: { memoryBytes: 256 * 1024 * 1024, pidsLimit: 100 } });
    const marker = `af_launcher_dies_${randomUUID()}`;
    const running = sb.exec({ command: `sh -c 'sleep 1000; : ${marker}'` });
    const { afInit } = await afInitOf(marker);
    process.kill(afInit, 'SIGKILL');
    const r = await running;
    expect(r.signal).toBe('SIGKILL');
    await expectNoProcessWith(marker);
    const next = await sb.exec({ command: 'echo again; cut -d" " -f22 /proc/1/stat' });
    expect(next.stdout.toString()).toMatch(/^again\n\d+\n$/);
  });

  it('a stopped (wedged) af-init does not keep a timed-out command running: the launcher is replaced', async () => {
    const sb = await start();
    const marker = `af_wedged_${randomUUID()}`;
    const controller = new AbortController();
    const first = sb.exec({ command: `sh -c 'sleep 1000; : ${marker}'`, signal: controller.signal });
    const { afInit } = await afInitOf(marker);
    process.kill(afInit, 'SIGSTOP');
    controller.abort();
    const r = await first;
    expect(r.cancelled).toBe(true);
    expect(r.signal).toBe('SIGKILL');
    await expectNoProcessWith(marker);
    expect((await sb.exec({ command: 'echo again' })).stdout.toString()).toBe('again\n');
  });

  it('keeps every af-init and command in the sandbox cgroups', async () => {
    const sb = await start({ resources: { memoryBytes: 256 * 1024 * 1024, pidsLimit: 100 } });
    const marker = `af_launcher_cg_${randomUUID()}`;
    const controller = new AbortController();
    const running = sb.exec({ command: `sh -c 'sleep 1000; : ${marker}'`, signal: controller.signal });
    const { afInit, command: sleeper } = await afInitOf(marker);
    for (const hierarchy of ['memory', 'pids']) {
      const cgroup = (await readFile(`/proc/${afInit}/cgroup`, 'utf8'))
        .split('\n')
        .find((l) => l.includes(`:${hierarchy}:`));
      expect(cgroup).toContain(`/agentfense/${sb.sandboxId}`);
      const mine = (await readFile(`/proc/${sleeper}/cgroup`, 'utf8'))
        .split('\n')
        .find((l) => l.includes(`:${hierarchy}:`));
      expect(mine).toBe(cgroup);
    }
    controller.abort();
    await running;
  });
});
