// `agentfense setup docker`: prepares this host for `--runtime docker` and says what it did — finds an
// engine (or starts Debian's dockerd with safe flags when asked), then builds the small local base image
// without any registry (debootstrap from the host's apt mirror, `docker import`).
import type { Command } from 'commander';
import { UnavailableError } from '@agentfense/protocol/core';
import { printJson } from '../io.js';
import type { CliContext } from '../io.js';

interface SetupDockerFlags {
  readonly startEngine?: boolean;
  readonly stateDir?: string;
  readonly image?: string;
  readonly rebuild?: boolean;
  readonly json?: boolean;
}

/** Registers `setup` and `setup docker` on the program. */
export function registerSetup(program: Command, { io }: CliContext): void {
  const setup = program.command('setup').description('prepare this host for a runtime');
  setup
    .command('docker')
    .description('check for a Docker engine (start one with --start-engine) and build the local base image')
    .option(
      '--start-engine',
      "start Debian's dockerd when no engine answers (no bridge, no iptables, no IP forwarding)",
    )
    // Defaults applied in the action: the docker runtime's module loads only when this command runs.
    .option(
      '--state-dir <dir>',
      'state directory of a dockerd started here (default /var/lib/agentfense/dockerd)',
    )
    .option('--image <name>', 'name of the base image to build (default agentfense/base:latest)')
    .option('--rebuild', 'rebuild the base image even if it exists')
    .option('--json', 'print what was done as JSON')
    .action(async (given: SetupDockerFlags) => {
      const { DEFAULT_DOCKERD_STATE_DIR, DEFAULT_IMAGE, ensureBaseImage, probeEngine, startDockerd } = await (
        await import('../../sandboxes/runtimes.js')
      ).dockerHostSetup();
      const flags = {
        ...given,
        stateDir: given.stateDir ?? DEFAULT_DOCKERD_STATE_DIR,
        image: given.image ?? DEFAULT_IMAGE,
      };
      const say = (line: string): void => {
        if (flags.json !== true) io.stderr.write(`agentfense: ${line}\n`);
      };
      let probe = await probeEngine();
      let started: { pid: number; dockerHost: string; logFile: string } | null = null;
      if (!probe.ok) {
        if (flags.startEngine !== true) {
          throw new UnavailableError(
            `no Docker engine answers at ${probe.dockerHost} (${probe.reason}); start one, or run ` +
              "`agentfense setup docker --start-engine` to start Debian's dockerd (apt-get install docker.io)",
          );
        }
        say(`no engine at ${probe.dockerHost}; starting dockerd (state in ${flags.stateDir})`);
        const engine = await startDockerd({ stateDir: flags.stateDir });
        started = { pid: engine.pid, dockerHost: engine.dockerHost, logFile: engine.logFile };
        probe = await probeEngine({ dockerHost: engine.dockerHost });
        if (!probe.ok) throw new UnavailableError(`dockerd started but does not answer: ${probe.reason}`);
        say(`started dockerd ${probe.version} (pid ${engine.pid}, log ${engine.logFile})`);
      } else {
        say(`Docker engine ${probe.version} answers at ${probe.dockerHost}`);
      }
      const image = await ensureBaseImage({
        image: flags.image,
        dockerHost: probe.dockerHost,
        force: flags.rebuild === true,
        progress: say,
      });
      say(
        image.action === 'present'
          ? `image ${image.image} is already there`
          : `image ${image.image} ${image.action} in ${image.seconds.toFixed(1)} s`,
      );
      if (started !== null) {
        say(`use it with: export DOCKER_HOST=${started.dockerHost}`);
      }
      say('ready: agentfense run <dir> --runtime docker -- <command>');
      if (flags.json === true) {
        printJson(io, { engine: { version: probe.version, dockerHost: probe.dockerHost, started }, image });
      }
    });
}
