// What a session needs from its sandbox (RuntimeInstance.spawn, @agentfense/sessions) over af-init: a
// long-lived process with stdin, stdout and stderr pipes. Killing it kills its whole session through the
// container's cgroup, as a closed session must leave nothing running.
import type { LauncherClient } from '@agentfense/launcher';
import { UnavailableError, type SandboxProcess, type SpawnOptions } from '@agentfense/protocol';
import type { ContainerCgroup } from '@agentfense/runtime-docker';

/** The node agent does not set the container's limits (the orchestrator did): none are reported here. */
export const NO_REPORTED_LIMITS = {
  memoryBytes: null,
  cpuQuota: null,
  cpuShares: null,
  pidsLimit: null,
  mechanism: 'orchestrator',
};

/** The part of a runtime instance a session uses. */
export interface SessionHost {
  readonly sandboxId: string;
  spawn(options: SpawnOptions): Promise<SandboxProcess>;
}

export function launcherSessionHost(options: {
  readonly sandboxId: string;
  readonly client: LauncherClient;
  readonly cgroup: ContainerCgroup;
  readonly env: Readonly<Record<string, string>>;
  readonly workspace: string;
}): SessionHost {
  const { client, cgroup } = options;
  return {
    sandboxId: options.sandboxId,
    async spawn(spawn: SpawnOptions): Promise<SandboxProcess> {
      const command = client.spawn({
        argv: [...spawn.argv],
        cwd: spawn.cwd ?? options.workspace,
        env: { ...options.env, ...spawn.env },
        stdin: true,
      });
      const pid = await command.pid;
      if (pid === null || command.stdin === null) {
        const outcome = await command.done.catch((err: unknown) => ({ kind: 'lost', err }));
        throw new UnavailableError(`af-init did not start the session shell: ${JSON.stringify(outcome)}`);
      }
      let killed: Promise<void> | undefined;
      return {
        pid,
        stdin: command.stdin,
        stdout: command.stdout,
        stderr: command.stderr,
        wait: () =>
          command.done.then(
            (o) => ({
              exitCode: o.kind === 'exited' ? o.code : o.kind === 'failed' ? 127 : null,
              signal: o.kind === 'signaled' ? String(o.signal) : null,
            }),
            () => ({ exitCode: null, signal: null }),
          ),
        kill: () =>
          (killed ??= (async () => {
            await cgroup.killSession(pid).catch(() => undefined);
            command.signal('SIGKILL');
          })()),
        audit: {
          runtime: 'docker',
          argv: [...spawn.argv],
          limits: NO_REPORTED_LIMITS,
        },
      };
    },
  };
}
