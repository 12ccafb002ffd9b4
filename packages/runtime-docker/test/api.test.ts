// The Engine API layer without an engine: DOCKER_HOST parsing, the exec stream's demultiplexing (frames split
// anywhere, backpressure), the engine's answers mapped to AgentFense errors, and the API bodies in step with
// the CLI argv shown in audit records.
import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  SANDBOX_PTY_MAX,
  UnavailableError,
  WrongStateError,
  type EnforcedLimits,
} from '@agentfense/protocol';
import { EngineApiError, EngineUnreachableError, parseDockerHost } from '../src/engine/api.js';
import { buildRunArgs, SANDBOX_USER, WRAPPER_SCRIPT } from '../src/exec/args.js';
import { buildCreateBody, buildExecBody } from '../src/engine/bodies.js';
import { demultiplex } from '../src/engine/demux.js';
import { apiError } from '../src/engine/engine-errors.js';

function frame(kind: number, text: string): Buffer {
  const payload = Buffer.from(text);
  const header = Buffer.alloc(8);
  header[0] = kind;
  header.writeUInt32BE(payload.length, 4);
  return Buffer.concat([header, payload]);
}

describe('parseDockerHost', () => {
  it('takes unix sockets and tcp addresses, refuses the rest with the fix', () => {
    expect(parseDockerHost('unix:///run/d.sock')).toEqual({
      origin: 'http://docker',
      socketPath: '/run/d.sock',
    });
    expect(parseDockerHost('tcp://127.0.0.1:2375')).toEqual({ origin: 'http://127.0.0.1:2375' });
    expect(() => parseDockerHost('ssh://me@host')).toThrow(InvalidArgumentError);
    expect(() => parseDockerHost('unix://relative.sock')).toThrow(/absolute/);
  });
});

describe('demultiplex', () => {
  it('splits stdout and stderr frames cut at any byte', async () => {
    const wire = Buffer.concat([frame(1, 'out1 '), frame(2, 'err'), frame(1, 'out2'), frame(0, 'x')]);
    for (let cut = 1; cut < wire.length; cut += 3) {
      const socket = new PassThrough();
      const out = new PassThrough();
      const err = new PassThrough();
      const done = demultiplex(socket, out, err);
      const texts = [out, err].map(async (s) => {
        const chunks: Buffer[] = [];
        for await (const c of s) chunks.push(c as Buffer);
        return Buffer.concat(chunks).toString();
      });
      socket.write(wire.subarray(0, cut));
      socket.end(wire.subarray(cut));
      await done;
      expect(await Promise.all(texts)).toEqual(['out1 out2', 'err']);
    }
  });

  it('pauses the connection while a consumer is behind (backpressure)', async () => {
    const socket = new PassThrough();
    let release: (() => void) | undefined;
    const slow = new Writable({
      highWaterMark: 4,
      write: (_chunk, _enc, done) => {
        release = done;
      },
    });
    const err = new PassThrough();
    const done = demultiplex(socket, slow, err);
    socket.write(frame(1, 'more than four bytes'));
    await new Promise((r) => setImmediate(r));
    expect(socket.isPaused()).toBe(true);
    release?.();
    await new Promise((r) => setImmediate(r));
    expect(socket.isPaused()).toBe(false);
    socket.end();
    await done;
  });
});

describe('apiError', () => {
  const cli = { host: 'unix:///run/x.sock' };
  it('maps the engine answers to error kinds with the engine message', () => {
    const unreachable = apiError(new EngineUnreachableError('connect ENOENT /run/x.sock'), {
      action: 'a',
      cli,
    });
    expect(unreachable).toBeInstanceOf(UnavailableError);
    expect(unreachable.message).toMatch(/agentfense setup docker/);
    const image = apiError(new EngineApiError(404, 'No such image: agentfense/base:latest'), {
      action: 'a',
      cli,
      image: 'agentfense/base:latest',
    });
    expect(image).toBeInstanceOf(UnavailableError);
    expect(image.message).toMatch(/agentfense setup docker/);
    const gone = apiError(new EngineApiError(409, 'Container abc is not running'), { action: 'a', cli });
    expect(gone).toBeInstanceOf(WrongStateError);
    expect(gone.message).toMatch(/is not running/);
    const bad = apiError(new EngineApiError(400, 'invalid CpuQuota'), { action: 'creating', cli });
    expect(bad).toBeInstanceOf(InvalidArgumentError);
    expect(bad.message).toMatch(/invalid CpuQuota/);
  });
});

describe('API bodies', () => {
  const limits: EnforcedLimits = {
    memoryBytes: 256 << 20,
    pidsLimit: 100,
    cpuQuota: 50_000,
    cpuShares: null,
    mechanism: 'docker',
  };
  const spec = {
    containerName: 'agentfense-sb_x',
    sandboxId: 'sb_x',
    image: 'agentfense/base:latest',
    workspaceHostPath: '/data/state/relay/ws',
    env: { HOME: '/home/agent', A: 'b' },
    limits,
    swapLimit: true,
    labels: { 'io.agentfense.state-dir': '/data/state/sb_x' },
  };

  it('the create body says what the audit argv says', () => {
    const body = buildCreateBody(spec);
    const argv = buildRunArgs(spec);
    expect(body.User).toBe(SANDBOX_USER);
    expect(argv).toContain(SANDBOX_USER);
    expect(body.Labels).toEqual({
      'io.agentfense.sandbox': 'sb_x',
      'io.agentfense.state-dir': '/data/state/sb_x',
    });
    expect(argv).toContain('io.agentfense.state-dir=/data/state/sb_x');
    expect(body.HostConfig).toMatchObject({
      Init: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      Memory: 256 << 20,
      MemorySwap: 256 << 20,
      PidsLimit: 100,
      CpuPeriod: 100_000,
      CpuQuota: 50_000,
      Mounts: [
        {
          Type: 'volume',
          Target: '/dev/pts',
          VolumeOptions: {
            NoCopy: true,
            DriverConfig: {
              Name: 'local',
              Options: {
                type: 'devpts',
                device: 'devpts',
                o: `nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,max=${String(SANDBOX_PTY_MAX)}`,
              },
            },
          },
        },
        {
          Type: 'bind',
          Source: spec.workspaceHostPath,
          Target: '/workspace',
          BindOptions: { Propagation: 'rslave' },
        },
      ],
    });
    expect(argv).toContain(
      `type=volume,target=/dev/pts,volume-nocopy,volume-driver=local,volume-opt=type=devpts,volume-opt=device=devpts,"volume-opt=o=nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,max=${String(SANDBOX_PTY_MAX)}"`,
    );
    expect(argv).toEqual(
      expect.arrayContaining(['--memory', String(256 << 20), '--pids-limit', '100', '--cpu-quota', '50000']),
    );
    expect(body.Env).toEqual(['HOME=/home/agent', 'A=b']);
  });

  it("binds a sandbox's files read-only, in the body and the audit argv alike", () => {
    const files = [
      { source: '/data/state/sb_x/docker/files-1/0', dest: '/etc/ssl/certs/ca-certificates.crt' },
    ];
    expect(buildCreateBody({ ...spec, files }).HostConfig?.Mounts?.at(-1)).toEqual({
      Type: 'bind',
      Source: '/data/state/sb_x/docker/files-1/0',
      Target: '/etc/ssl/certs/ca-certificates.crt',
      ReadOnly: true,
    });
    expect(buildRunArgs({ ...spec, files })).toContain(
      'type=bind,source=/data/state/sb_x/docker/files-1/0,target=/etc/ssl/certs/ca-certificates.crt,readonly',
    );
  });

  it('the exec body runs the command under the wrapper, never through a shell string of ours', () => {
    const body = buildExecBody({
      command: ['echo', '$(id)'],
      env: { X: 'y' },
      interactive: false,
      cwd: '/workspace/src',
    });
    expect(body.Cmd).toEqual(['/bin/sh', '-c', WRAPPER_SCRIPT, 'agentfense-wrapper', 'echo', '$(id)']);
    expect(body).toMatchObject({
      AttachStdin: false,
      Tty: false,
      WorkingDir: '/workspace/src',
      Env: ['X=y'],
    });
    expect(() => buildExecBody({ command: ['x'], interactive: false, cwd: '../etc' })).toThrow(
      InvalidArgumentError,
    );
  });
});

describe('seccomp profile', () => {
  it('is the shared deny list in Docker JSON: EPERM for each listed call, namespace flags by mask', async () => {
    const { dockerSeccompProfile } = await import('../src/container/seccomp.js');
    const { SECCOMP_DENIED_SYSCALLS } = await import('@agentfense/protocol');
    const profile = dockerSeccompProfile();
    expect(profile.defaultAction).toBe('SCMP_ACT_ALLOW');
    expect(profile.syscalls[0]).toMatchObject({ action: 'SCMP_ACT_ERRNO', errnoRet: 1 });
    expect(profile.syscalls[0]?.names).toEqual(SECCOMP_DENIED_SYSCALLS);
    expect(SECCOMP_DENIED_SYSCALLS).toEqual(
      expect.arrayContaining(['mount', 'bpf', 'keyctl', 'io_uring_setup']),
    );
    expect(profile.syscalls).toContainEqual({
      names: ['unshare'],
      action: 'SCMP_ACT_ERRNO',
      errnoRet: 1,
      args: [{ index: 0, value: 0x10000000, valueTwo: 0x10000000, op: 'SCMP_CMP_MASKED_EQ' }],
    });
  });
});
