// The Engine API request bodies of a sandbox (pure): the container's create body and one command's exec
// body. They say exactly what buildRunArgs/buildExecArgs say in the docker CLI's words (those argv arrays
// remain the human-readable form in audit records); test/bodies.test.ts keeps the two in step.
import type { ContainerCreateOptions, ExecCreateOptions } from 'dockerode';
import { validateCommand, validateCwd, validateEnv } from '@agentfense/protocol';
import type { EnforcedLimits } from '@agentfense/protocol';
import {
  SANDBOX_HOME,
  SANDBOX_HOSTNAME,
  SANDBOX_LABEL,
  SANDBOX_USER,
  WORKSPACE_DIR,
  DEVPTS_DIR,
  DEVPTS_VOLUME_OPTIONS,
  WRAPPER_SCRIPT,
  KILL_SESSION_SCRIPT,
  LAUNCHER_ARGS,
  LAUNCHER_DIR,
  LAUNCHER_ENTRYPOINT,
  userPart,
} from '../exec/args.js';
import type { DockerExecSpec, DockerRunSpec } from '../exec/args.js';

/** The create body (`POST /containers/create?name=…`) of a sandbox's container. */
export function buildCreateBody(spec: DockerRunSpec): ContainerCreateOptions {
  const env = validateEnv(spec.env);
  return {
    Image: spec.image,
    Entrypoint: spec.launcherDir === undefined ? ['sleep'] : [LAUNCHER_ENTRYPOINT],
    Cmd: spec.launcherDir === undefined ? ['infinity'] : [...LAUNCHER_ARGS],
    User: spec.user ?? SANDBOX_USER,
    Hostname: SANDBOX_HOSTNAME,
    WorkingDir: WORKSPACE_DIR,
    Env: Object.entries(env).map(([name, value]) => `${name}=${value}`),
    Labels: { [SANDBOX_LABEL]: spec.sandboxId, ...(spec.labels ?? {}) },
    HostConfig: {
      Init: spec.launcherDir === undefined,
      LogConfig: { Type: 'none', Config: {} },
      CapDrop: ['ALL'],
      SecurityOpt: [
        'no-new-privileges',
        ...(spec.seccompProfile === undefined ? [] : [`seccomp=${spec.seccompProfile}`]),
      ],
      IpcMode: 'private',
      CgroupnsMode: 'private',
      NetworkMode: 'none',
      ReadonlyRootfs: spec.readOnlyRootfs !== false,
      Tmpfs: {
        '/tmp': `rw,nosuid,nodev,mode=1777${spec.tmpBytes == null ? '' : `,size=${String(spec.tmpBytes)}`}`,
        [SANDBOX_HOME]: `rw,nosuid,nodev,uid=${userPart(spec.user, 0)},gid=${userPart(spec.user, 1)},mode=0700`,
      },
      Mounts: [
        {
          Type: 'volume',
          Target: DEVPTS_DIR,
          VolumeOptions: {
            NoCopy: true,
            DriverConfig: { Name: 'local', Options: { ...DEVPTS_VOLUME_OPTIONS } },
          },
        },
        {
          Type: 'bind',
          Source: spec.workspaceHostPath,
          Target: WORKSPACE_DIR,
          ReadOnly: false,
          BindOptions: { Propagation: 'rslave' },
        },
        ...(spec.launcherDir === undefined
          ? []
          : [{ Type: 'bind', Source: spec.launcherDir, Target: LAUNCHER_DIR, ReadOnly: true }]),
        ...(spec.files ?? []).map((f) => ({
          Type: 'bind',
          Source: f.source,
          Target: f.dest,
          ReadOnly: true,
        })),
      ],
      ...limitFields(spec.limits, spec.swapLimit),
    },
  } as ContainerCreateOptions;
}

/**
 * The container's resource fields for the limits in force (null = not applied): part of the create body,
 * and the body of `POST /containers/{id}/update` that gives a pooled container its sandbox's limits.
 */
export function limitFields(limits: EnforcedLimits, swapLimit: boolean): Record<string, number> {
  const out: Record<string, number> = {};
  if (limits.memoryBytes !== null) {
    out['Memory'] = limits.memoryBytes;
    if (swapLimit) out['MemorySwap'] = limits.memoryBytes;
  }
  if (limits.pidsLimit !== null) out['PidsLimit'] = limits.pidsLimit;
  if (limits.cpuQuota !== null) {
    out['CpuPeriod'] = 100_000;
    out['CpuQuota'] = limits.cpuQuota;
  }
  if (limits.cpuShares !== null) out['CpuShares'] = limits.cpuShares;
  return out;
}

/** The exec body (`POST /containers/{id}/exec`) that runs one command under the session wrapper. */
export function buildExecBody(spec: Omit<DockerExecSpec, 'container'>): ExecCreateOptions {
  validateCommand(spec.command);
  const env = validateEnv(spec.env ?? {});
  const cwd = validateCwd(spec.cwd ?? WORKSPACE_DIR);
  const command = typeof spec.command === 'string' ? ['/bin/sh', '-c', spec.command] : [...spec.command];
  return {
    AttachStdin: spec.interactive,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    User: spec.user ?? SANDBOX_USER,
    WorkingDir: cwd,
    Env: Object.entries(env).map(([name, value]) => `${name}=${value}`),
    Cmd: ['/bin/sh', '-c', WRAPPER_SCRIPT, 'agentfense-wrapper', ...command],
  };
}

/** The exec body of the in-container fallback that kills a command's session. */
export function buildKillBody(sessionId: number, user?: string): ExecCreateOptions {
  return {
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    User: user ?? SANDBOX_USER,
    Cmd: ['/bin/sh', '-c', KILL_SESSION_SCRIPT, 'agentfense-kill', String(sessionId)],
  };
}
