// The docker CLI, for `agentfense setup docker` only (no CLI runs at sandbox time: the runtime talks to the
// Engine API, api.ts): finding the `docker` executable, the CLI's environment, one call with an argv array.
import { execa } from 'execa';
import { UnavailableError, findExecutable } from '@agentfense/protocol';
import { SETUP_COMMAND } from '../engine/engine-errors.js';

/** Variables of the control plane's environment that configure the docker CLI (and nothing else passes). */
const CLI_ENV_NAMES = [
  'DOCKER_HOST',
  'DOCKER_CONTEXT',
  'DOCKER_CONFIG',
  'DOCKER_CERT_PATH',
  'DOCKER_TLS_VERIFY',
  'HOME',
] as const;

/** How to run the docker CLI: the executable and the environment it gets (never the sandbox's). */
export interface DockerCli {
  readonly path: string;
  readonly env: Readonly<Record<string, string>>;
  /** Where the engine is, for messages (`DOCKER_HOST` or docker's default socket). */
  readonly host: string;
}

/** The result of one CLI call (never rejects for a non-zero exit; see `failure`). */
export interface CliResult {
  readonly exitCode: number | undefined;
  readonly stdout: string;
  readonly stderr: string;
  readonly failed: boolean;
}

/** Finds an executable docker CLI: the configured path, else PATH, else the usual system directories. */
export async function resolveDockerPath(configured: string | undefined): Promise<string> {
  const found = await findExecutable({ name: 'docker', configured });
  if (found !== null) return found;
  throw new UnavailableError(
    `the docker CLI is not installed (no executable ${configured ?? 'docker on PATH'}): install Debian's ` +
      `engine with \`apt-get install docker.io\`, then run \`${SETUP_COMMAND}\``,
  );
}

/** The CLI's environment: only the docker settings of ours (an explicit `dockerHost` wins over DOCKER_HOST). */
export function cliEnvironment(dockerHost: string | undefined): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of CLI_ENV_NAMES) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  if (dockerHost !== undefined) env['DOCKER_HOST'] = dockerHost;
  return env;
}

/** Builds the CLI handle. */
export async function createDockerCli(options: {
  dockerPath?: string;
  dockerHost?: string;
}): Promise<DockerCli> {
  const path = await resolveDockerPath(options.dockerPath);
  const env = cliEnvironment(options.dockerHost);
  return { path, env, host: env['DOCKER_HOST'] ?? 'unix:///var/run/docker.sock' };
}

/** Runs `docker <args>` to completion; output as text. Throws UnavailableError if the CLI cannot start. */
export async function runDocker(
  cli: DockerCli,
  args: readonly string[],
  options: { timeoutMs?: number } = {},
): Promise<CliResult> {
  const result = await execa(cli.path, args, {
    reject: false,
    env: cli.env,
    extendEnv: false,
    stdin: 'ignore',
    ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
  });
  if (result.exitCode === undefined && !result.timedOut) {
    throw new UnavailableError(`could not run the docker CLI (${cli.path}): ${result.shortMessage}`, {
      cause: result.cause,
    });
  }
  if (result.timedOut) {
    throw new UnavailableError(
      `the Docker engine at ${cli.host} did not answer \`docker ${args[0] ?? ''}\` within ${String(options.timeoutMs)} ms`,
    );
  }
  return {
    exitCode: result.exitCode,
    stdout: result.stdout,
    stderr: result.stderr,
    failed: result.failed,
  };
}
