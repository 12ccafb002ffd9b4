// buildRunArgs / buildExecArgs: the exact argv (inline snapshot) and the properties it must keep; the
// wrapper script's behaviour under the host's /bin/sh (no docker needed: it is plain POSIX sh + setsid).
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, NO_LIMITS } from '@agentfense/protocol';
import {
  SANDBOX_USER,
  buildExecArgs,
  buildKillArgs,
  buildRunArgs,
  csvField,
  SESSION_HEADER_PREFIX,
  WRAPPER_SCRIPT,
} from '../src/exec/args.js';
import type { DockerRunSpec } from '../src/exec/args.js';

const spec = (over: Partial<DockerRunSpec> = {}): DockerRunSpec => ({
  containerName: 'agentfense-sb_1',
  sandboxId: 'sb_1',
  image: 'agentfense/base:latest',
  workspaceHostPath: '/srv/af/mnt/sb_1',
  env: { HOME: '/home/agent', TOKEN: 'x' },
  limits: NO_LIMITS,
  swapLimit: true,
  ...over,
});

/** The value following `flag` at each of its occurrences. */
function valuesOf(args: readonly string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1] ?? ''] : []));
}

describe('buildRunArgs', () => {
  it('builds the full argv of a sandbox container', () => {
    expect(buildRunArgs(spec())).toMatchInlineSnapshot(`
      [
        "run",
        "--detach",
        "--pull",
        "never",
        "--name",
        "agentfense-sb_1",
        "--label",
        "io.agentfense.sandbox=sb_1",
        "--init",
        "--log-driver",
        "none",
        "--hostname",
        "agentfense",
        "--user",
        "2000000000:2000000000",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--ipc",
        "private",
        "--cgroupns",
        "private",
        "--network",
        "none",
        "--read-only",
        "--tmpfs",
        "/tmp:rw,nosuid,nodev,mode=1777",
        "--tmpfs",
        "/home/agent:rw,nosuid,nodev,uid=2000000000,gid=2000000000,mode=0700",
        "--mount",
        "type=volume,target=/dev/pts,volume-nocopy,volume-driver=local,volume-opt=type=devpts,volume-opt=device=devpts,"volume-opt=o=nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,max=256"",
        "--mount",
        "type=bind,source=/srv/af/mnt/sb_1,target=/workspace,bind-propagation=rslave",
        "--workdir",
        "/workspace",
        "--env",
        "HOME=/home/agent",
        "--env",
        "TOKEN=x",
        "--entrypoint",
        "sleep",
        "agentfense/base:latest",
        "infinity",
      ]
    `);
  });

  it('applies only the limits in force, with swap capped at the memory limit when the engine can', () => {
    const limits = {
      memoryBytes: 64 << 20,
      pidsLimit: 50,
      cpuQuota: 50_000,
      cpuShares: 512,
      mechanism: 'docker',
    };
    const args = buildRunArgs(spec({ limits }));
    expect(valuesOf(args, '--memory')).toEqual([String(64 << 20)]);
    expect(valuesOf(args, '--memory-swap')).toEqual([String(64 << 20)]);
    expect(valuesOf(args, '--pids-limit')).toEqual(['50']);
    expect(valuesOf(args, '--cpu-period')).toEqual(['100000']);
    expect(valuesOf(args, '--cpu-quota')).toEqual(['50000']);
    expect(valuesOf(args, '--cpu-shares')).toEqual(['512']);
    expect(valuesOf(buildRunArgs(spec({ limits, swapLimit: false })), '--memory-swap')).toEqual([]);
    expect(buildRunArgs(spec()).some((a) => /^--(memory|pids|cpu)/.test(a))).toBe(false);
  });

  it('gives every container a network namespace with only a loopback (never a docker network)', () => {
    expect(valuesOf(buildRunArgs(spec()), '--network')).toEqual(['none']);
  });

  it('quotes the workspace as one CSV field, so a comma cannot add mount options', () => {
    const args = buildRunArgs(spec({ workspaceHostPath: '/srv/a,readonly=false,"x' }));
    expect(valuesOf(args, '--mount').filter((m) => m.startsWith('type=bind'))).toEqual([
      'type=bind,source="/srv/a,readonly=false,""x",target=/workspace,bind-propagation=rslave',
    ]);
    expect(csvField('plain/path')).toBe('plain/path');
    expect(csvField('a b')).toBe('"a b"');
  });

  it('keeps the image after every option and refuses bad env names', () => {
    const args = buildRunArgs(spec());
    expect(args.slice(-2)).toEqual(['agentfense/base:latest', 'infinity']);
    expect(() => buildRunArgs(spec({ env: { 'A-B': '1' } }))).toThrow(InvalidArgumentError);
    expect(buildRunArgs(spec({ readOnlyRootfs: false }))).not.toContain('--read-only');
  });
});

describe('buildExecArgs', () => {
  it('runs a string through /bin/sh -c and an argv as is, under the wrapper, as the sandbox user', () => {
    const args = buildExecArgs({ container: 'c1', command: 'echo hi', interactive: false });
    expect(args.slice(0, 6)).toEqual(['exec', '--user', SANDBOX_USER, '--workdir', '/workspace', 'c1']);
    expect(args.slice(6, 9)).toEqual(['/bin/sh', '-c', WRAPPER_SCRIPT]);
    expect(args.slice(10)).toEqual(['/bin/sh', '-c', 'echo hi']);
    const argv = buildExecArgs({ container: 'c1', command: ['printf', '%s', '-x'], interactive: true });
    expect(argv[1]).toBe('--interactive');
    expect(argv.slice(-3)).toEqual(['printf', '%s', '-x']);
  });

  it('passes env and cwd as single arguments and validates them', () => {
    const args = buildExecArgs({
      container: 'c1',
      command: 'x',
      interactive: false,
      env: { A: 'a b;c' },
      cwd: '/tmp',
    });
    expect(valuesOf(args, '--env')).toEqual(['A=a b;c']);
    expect(valuesOf(args, '--workdir')).toEqual(['/tmp']);
    expect(() => buildExecArgs({ container: 'c', command: 'x', interactive: false, cwd: 'tmp' })).toThrow(
      InvalidArgumentError,
    );
    expect(() => buildExecArgs({ container: 'c', command: [], interactive: false })).toThrow(
      InvalidArgumentError,
    );
    expect(() =>
      buildExecArgs({ container: 'c', command: 'x', interactive: false, env: { '1A': 'x' } }),
    ).toThrow(InvalidArgumentError);
  });

  it('kill args pass the session id as a positional parameter', () => {
    expect(buildKillArgs('c1', 42).slice(-2)).toEqual(['agentfense-kill', '42']);
  });
});

describe('WRAPPER_SCRIPT under the host shell', () => {
  const wrap = (command: string[], input?: string): ReturnType<typeof execa> =>
    execa('/bin/sh', ['-c', WRAPPER_SCRIPT, 'agentfense-wrapper', ...command], {
      reject: false,
      stripFinalNewline: false,
      ...(input === undefined ? { stdin: 'ignore' } : { input }),
    });

  it('reports the session first on stderr, passes stdin, output and the exit status through', async () => {
    const r = await wrap(['/bin/sh', '-c', 'cat; echo err >&2; exit 3'], 'in\n');
    expect(r.exitCode).toBe(3);
    expect(r.stdout).toBe('in\n');
    const match = new RegExp(`^${SESSION_HEADER_PREFIX}(\\d+)\\nerr\\n$`).exec(String(r.stderr));
    expect(match).not.toBeNull();
  });

  it('runs the command as a session leader (the reported id is its own sid)', async () => {
    const r = await wrap(['/bin/sh', '-c', 'cut -d" " -f6 /proc/$$/stat']);
    const session = new RegExp(`^${SESSION_HEADER_PREFIX}(\\d+)\\n`).exec(String(r.stderr))?.[1];
    expect(String(r.stdout).trim()).toBe(session);
  });

  it('restores the caller PATH for the command, even one that would hide setsid', async () => {
    const r = await execa('/bin/sh', ['-c', WRAPPER_SCRIPT, 'w', '/bin/sh', '-c', 'echo "$PATH"'], {
      env: { PATH: '/nowhere' },
      extendEnv: false,
      reject: false,
    });
    expect(r.stdout).toBe('/nowhere');
    expect(r.exitCode).toBe(0);
  });

  it('gives the command SIGINT and SIGQUIT at their defaults although it starts as a background job', async () => {
    const r = await wrap(['/bin/sh', '-c', 'grep SigIgn /proc/$$/status']);
    const mask = BigInt(`0x${/SigIgn:\s+([0-9a-f]+)/.exec(String(r.stdout))?.[1] ?? 'ff'}`);
    expect(mask & 0b110n).toBe(0n); // bit 1: SIGINT, bit 2: SIGQUIT
    expect((await wrap(['A=b'])).exitCode).toBe(127); // never read as an env assignment
  });

  it('reports a signal death as 128 + n and kills background jobs the command left', async () => {
    expect((await wrap(['/bin/sh', '-c', 'kill -TERM $$'])).exitCode).toBe(143);
    const marker = `af_wrap_${process.pid}_${Date.now()}`;
    const r = await wrap(['/bin/sh', '-c', `sh -c 'sleep 1000; : ${marker}' >/dev/null 2>&1 & echo $!`]);
    const pid = Number(String(r.stdout).trim());
    // The background job was SIGKILLed by the wrapper: give the kernel a moment to reap it.
    const deadline = Date.now() + 3_000;
    let alive = true;
    while (alive && Date.now() < deadline) {
      try {
        process.kill(pid, 0);
        await new Promise((resolve) => setTimeout(resolve, 20));
      } catch {
        alive = false;
      }
    }
    expect(alive).toBe(false);
  });
});
