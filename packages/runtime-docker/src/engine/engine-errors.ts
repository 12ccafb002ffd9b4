// The engine's failures as AgentFense errors with stable codes and a message that says what to do: from the
// Engine API (apiError) and from the CLI's stderr (engineError; `agentfense setup docker` uses the CLI).
import {
  AgentFenseError,
  InternalError,
  InvalidArgumentError,
  UnavailableError,
  WrongStateError,
} from '@agentfense/protocol';
import { EngineApiError, EngineUnreachableError, unreachableEngine } from './api.js';
import { DEFAULT_IMAGE } from '../exec/args.js';

/** The command users are told to run when the engine or the base image is missing. */
export const SETUP_COMMAND = 'agentfense setup docker';

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
/**
 * What the engine (or runc under it, for an exec that raced the container's end) says when the container
 * is not there to run in.
 */
export const CONTAINER_GONE =
  /No such container|is not running|is paused|is restarting|marked for removal|cannot exec in a stopped state/i;

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
  if (CONTAINER_GONE.test(stderr)) {
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
