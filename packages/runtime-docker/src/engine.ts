// Talking to the Docker engine through its CLI: finding the `docker` executable, the CLI's environment, one
// call with an argv array, and turning the engine's error messages into AgentFense errors with stable codes.
import { execa } from 'execa';
import {
  AgentFenseError,
  InternalError,
  InvalidArgumentError,
  UnavailableError,
  WrongStateError,
  findExecutable,
} from '@agentfense/protocol';
import { EngineApiError, EngineUnreachableError, unreachableEngine } from './api.js';
import { DEFAULT_IMAGE } from './args.js';

/** The command users are told to run when the engine or the base image is missing. */
export const SETUP_COMMAND = 'agentfense setup docker';

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

/** What was being done when the engine failed, for the error message. */
export interface EngineErrorContext {
  /** e.g. `starting the sandbox container`. */
  readonly action: string;
  /** Where the engine is (a DockerCli or an EngineApi: both carry `host`). */
  readonly cli: { readonly host: string };
  /** The image involved, if any (named in missing-image errors). */
  readonly image?: string;
}

/** True when the CLI's message means no engine answered (no daemon, wrong socket, no permission). */
export function isEngineUnreachable(stderr: string): boolean {
  return /Cannot connect to the Docker daemon|Is the docker daemon running|error during connect|permission denied while trying to connect/i.test(
    stderr,
  );
}

/** Turns the engine's stderr into an AgentFense error with a stable code and a message that says what to do. */
export function engineError(stderr: string, context: EngineErrorContext): AgentFenseError {
  const said = stderr.trim().split('\n').filter(Boolean).slice(0, 3).join(' / ') || 'no message';
  if (isEngineUnreachable(stderr)) return unreachableEngine(context.cli.host, said, SETUP_COMMAND);
  if (/No such image|Unable to find image|pull access denied|manifest unknown/i.test(stderr)) {
    const image = context.image ?? 'the image';
    const fix =
      context.image === undefined || context.image === DEFAULT_IMAGE
        ? `build it with \`${SETUP_COMMAND}\``
        : 'build or load it into this engine first (AgentFense never pulls from a registry)';
    return new UnavailableError(`image ${image} is not available in the Docker engine: ${fix}`, {
      details: { image },
    });
  }
  if (/not a shared or slave mount/i.test(stderr)) {
    return new InvalidArgumentError(
      `the workspace must be on a shared (or slave) mount so a remounted worker propagates into the ` +
        `container (e.g. \`mount --bind D D && mount --make-shared D\` for a parent D): ${said}`,
    );
  }
  if (/No such container|is not running|is paused|is restarting|marked for removal/i.test(stderr)) {
    return new WrongStateError(`the sandbox's container is not running (${said}) while ${context.action}`);
  }
  return new InternalError(`docker failed while ${context.action}: ${said}`);
}

/**
 * Turns a failed Engine API call into an AgentFense error: no engine → unavailable (with the fix), the
 * engine's own message mapped like the CLI's (missing image, container gone, …), a 400 → invalid argument.
 * AgentFense errors pass through unchanged.
 */
export function apiError(err: unknown, context: EngineErrorContext): AgentFenseError {
  if (err instanceof AgentFenseError) return err;
  if (err instanceof EngineUnreachableError) {
    return unreachableEngine(context.cli.host, err.message, SETUP_COMMAND);
  }
  if (err instanceof EngineApiError) {
    const mapped = engineError(err.message, context);
    if (mapped instanceof InternalError && err.status === 400) {
      return new InvalidArgumentError(`the Docker engine refused ${context.action}: ${err.message}`);
    }
    return mapped;
  }
  return new InternalError(`docker failed while ${context.action}: ${(err as Error).message}`, {
    cause: err,
  });
}
