// The docker runtime's configuration (createDockerRuntime in runtime.ts).
import type { PoolUserLeases } from './container/pool.js';
import type { RuntimeLogger } from './logger.js';

/** Configuration of the docker runtime (all optional). */
export interface DockerRuntimeOptions {
  /** Unused at run time (the runtime speaks the Engine API); kept so existing configurations still load. */
  readonly dockerPath?: string;
  /** The engine's address (e.g. `unix:///run/agentfense/docker.sock`); default: DOCKER_HOST, else docker's default. */
  readonly dockerHost?: string;
  /** Image for sandboxes that name none; default DEFAULT_IMAGE (`agentfense/base:latest`). */
  readonly image?: string;
  /** Mount the image read-only (default true); /tmp and HOME are writable tmpfs either way. */
  readonly readOnlyRootfs?: boolean;
  /**
   * Look at each container's cgroup from the host (default true): OOM reports and kills that need no
   * process in the container. Needs the engine on this host and root; false uses the in-container kill
   * script only, and reports no OOM kills.
   */
  readonly hostCgroup?: boolean;
  /**
   * uid:gid of the container's processes (numeric; default SANDBOX_USER, a dedicated id) when start() is
   * given no user of the sandbox's own. No host user may have this uid (check() refuses otherwise): it is
   * the host uid of everything the agent starts.
   */
  readonly user?: string;
  /**
   * Leases each pooled container a host uid of its own (the control plane's host-wide table), so a
   * sandbox that takes one runs under a uid no other sandbox has (reserveUser). Absent: pooled containers
   * run as `user`.
   */
  readonly hostUsers?: PoolUserLeases;
  /** The control plane's data directory: shown as `<data>` in audit records. */
  readonly dataDir?: string;
  /** Cap on each of stdout/stderr of `exec` (bytes; default 16 MiB, at most 32 MiB); exceeding it kills the command. */
  readonly maxOutputBytes?: number;
  /**
   * Idle containers kept started ahead per (image, /tmp size) once a sandbox of that kind has started
   * (default 0: off; the control plane turns it on). Each is used by one sandbox only; a sandbox with files
   * (its CA bundle) never uses one. close() removes them.
   */
  readonly poolSize?: number;
  /**
   * Where the pool keeps the directories its containers' /workspace binds (root-only; one subdirectory per
   * process). Default `<dataDir>/docker-pool`, or `<tmpdir>/agentfense-docker-pool` without a dataDir.
   */
  readonly poolDir?: string;
  readonly logger?: RuntimeLogger;
  /**
   * Run af-init as each container's pid 1 and every `exec` through it (default true; needs `hostCgroup`).
   * false: every command is an engine exec under the session wrapper, as before the launcher.
   */
  readonly launcher?: boolean;
}
