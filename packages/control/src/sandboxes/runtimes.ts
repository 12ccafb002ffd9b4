// The runtime registry: sandboxes name a runtime ('bwrap', 'docker', or one an embedder registers); the
// control plane resolves the name through a map given at open time, creating each runtime lazily and once.
// Control never branches on the name: what differs between runtimes is in their `traits`. This module is
// the only one in control that imports a runtime package, and only when a runtime is first needed.
import type { Logger } from 'pino';
import { InvalidArgumentError } from '@agentfense/protocol';
import type { SandboxRuntime } from '@agentfense/protocol';
import type * as DockerRuntimeModule from '@agentfense/runtime-docker';
import type { HostUserLeases } from './host-user.js';

/** A runtime, or a factory called the first time a sandbox needs it. */
export type RuntimeProvider = SandboxRuntime | (() => SandboxRuntime | Promise<SandboxRuntime>);

/** Runtime providers by name. */
export type RuntimeMap = Readonly<Record<string, RuntimeProvider>>;

export class RuntimeRegistry {
  readonly #providers: RuntimeMap;
  readonly #resolved = new Map<string, Promise<SandboxRuntime>>();

  constructor(providers: RuntimeMap) {
    this.#providers = providers;
  }

  /** The names sandboxes may use. */
  get names(): string[] {
    return Object.keys(this.#providers);
  }

  /** Throws InvalidArgumentError unless `name` is a registered runtime. */
  check(name: string): string {
    if (!Object.hasOwn(this.#providers, name)) {
      throw new InvalidArgumentError(
        `unknown runtime ${JSON.stringify(name)}; available: ${this.names.join(', ') || 'none'}`,
      );
    }
    return name;
  }

  /** The runtime called `name` (created on first use). */
  get(name: string): Promise<SandboxRuntime> {
    this.check(name);
    let runtime = this.#resolved.get(name);
    if (runtime === undefined) {
      const provider = this.#providers[name] as RuntimeProvider;
      runtime = Promise.resolve(typeof provider === 'function' ? provider() : provider);
      // A factory that failed (a missing engine) is retried next time rather than cached.
      runtime.catch(() => this.#resolved.delete(name));
      this.#resolved.set(name, runtime);
    }
    return runtime;
  }

  /**
   * Closes the runtimes created so far (docker removes its idle pooled containers). A runtime that failed
   * to close is reported to `onError`, and the others are still closed.
   */
  async close(onError: (err: unknown, runtime: string) => void): Promise<void> {
    await Promise.all(
      [...this.#resolved.entries()].map(async ([name, r]) => {
        try {
          await (await r).close?.();
        } catch (err) {
          onError(err, name);
        }
      }),
    );
  }
}

/** The runtimes every control plane has unless its options replace them: bwrap and docker. */
export function builtinRuntimes(options: {
  readonly dataDir: string;
  readonly logger: Logger;
  /** Idle docker containers kept per image (the runtime's `poolSize`). */
  readonly dockerPoolSize: number;
  /** The host-wide uid leases: docker's pool leases each idle container's uid up front. */
  readonly hostUsers: HostUserLeases;
}): RuntimeMap {
  const { dataDir, logger } = options;
  return {
    bwrap: async () =>
      (await import('@agentfense/runtime-bwrap')).createBwrapRuntime({
        dataDir,
        logger: logger.child({ component: 'runtime-bwrap' }),
      }),
    // The engine is found through DOCKER_HOST or docker's default socket.
    docker: async () =>
      (await import('@agentfense/runtime-docker')).createDockerRuntime({
        dataDir,
        poolSize: options.dockerPoolSize,
        hostUsers: options.hostUsers,
        logger: logger.child({ component: 'runtime-docker' }),
      }),
  };
}

/** The docker runtime's host set-up (`agentfense setup docker`), loaded only when that command runs. */
export function dockerHostSetup(): Promise<typeof DockerRuntimeModule> {
  return import('@agentfense/runtime-docker');
}

/**
 * A client of a Docker engine's API, loaded only when asked for: serve's Swarm placement talks to the
 * Swarm manager's engine with it. It lives here so runtime packages stay imported by this module alone.
 */
export async function dockerEngineApi(
  host: string,
): Promise<ReturnType<typeof DockerRuntimeModule.createEngineApi>> {
  const { createEngineApi } = await import('@agentfense/runtime-docker');
  return createEngineApi(host);
}
