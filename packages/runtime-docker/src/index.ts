// Public API of @agentfense/runtime-docker: the docker SandboxRuntime, the pieces worth testing alone, and
// the host setup (engine, base image) that `agentfense setup docker` and the tests use.

// --- Runtime ---
export { createDockerRuntime, containerName } from './runtime.js';
export type { DockerRuntime } from './runtime.js';
export type { DockerRuntimeOptions } from './options.js';
export { MAX_POOL_KEYS, MAX_POOL_SIZE, collectPoolGarbage } from './container/pool.js';
export type { RuntimeLogger } from './logger.js';

// --- docker argv (pure) ---
export {
  buildRunArgs,
  buildExecArgs,
  buildKillArgs,
  csvField,
  BASE_ENV,
  DEFAULT_IMAGE,
  SANDBOX_USER,
  SANDBOX_HOME,
  SANDBOX_HOSTNAME,
  SANDBOX_LABEL,
  POOL_OWNER_LABEL,
  POOL_DIR_LABEL,
  STATE_LABEL,
  buildUpdateArgs,
  WORKSPACE_DIR,
  WRAPPER_SCRIPT,
  KILL_SESSION_SCRIPT,
  SESSION_HEADER_PREFIX,
} from './exec/args.js';
export type { DockerRunSpec, DockerExecSpec } from './exec/args.js';
// cwd/env validation is shared with runtime-bwrap (from @agentfense/protocol, re-exported for callers).
export { validateCwd, validateEnv } from '@agentfense/protocol';
export { validateLimits } from './validate.js';
export { planLimits, parseEngineCapabilities } from './container/limits.js';
export type { EngineCapabilities } from './container/limits.js';
export { SessionHeaderParser } from './exec/header.js';
export { DOCKER_SECCOMP_PROFILE, dockerSeccompProfile } from './container/seccomp.js';

// --- The Engine API client (the Swarm orchestrator adapter speaks to a manager through it) ---
export { createEngineApi, EngineApiError, EngineUnreachableError } from './engine/api.js';
export type { EngineApi, RequestOptions } from './engine/api.js';

// --- Engine errors ---
export { SETUP_COMMAND, engineError, isEngineUnreachable } from './engine/engine-errors.js';

// --- Audit records ---
export { maskArgv, maskHostPaths } from './exec/audit.js';
export type { PathPlaceholder, MaskArgvOptions } from '@agentfense/protocol';

// --- The workspace relay (a remounted worker propagates into a running container) ---
export { clearWorkspaceRelays, createWorkspaceRelay, propagationOf } from './container/relay.js';
export type { WorkspaceRelay } from './container/relay.js';

// --- af-init in a container the runtime did not create (the node agent of a cluster deployment) ---
export { LAUNCHER_DIR_PREFIX, listenForLauncher } from './launcher/launcher.js';
export type { LauncherListener } from './launcher/launcher.js';
export { runInitExec } from './launcher/exec.js';
export type { InitExecOptions } from './launcher/exec.js';
export { containerEnv } from './container/containers.js';

// --- Host view of a container (OOM counter, session kills) ---
export {
  parseCgroupMounts,
  parseOomKills,
  parseProcCgroup,
  resolveContainerCgroup,
} from './container/cgroup.js';
export type { ContainerCgroup } from './container/cgroup.js';

// --- Host setup: an engine and the base image (`agentfense setup docker`) ---
export {
  DEFAULT_DOCKERD_STATE_DIR,
  DOCKERD_FLAGS,
  dockerdPaths,
  probeEngine,
  startDockerd,
  stopDockerd,
} from './setup/dockerd.js';
export type { EngineProbe, StartDockerdOptions, StartedDockerd } from './setup/dockerd.js';
export {
  DEFAULT_IMAGE_CACHE_DIR,
  baseTarballPath,
  buildBaseTarball,
  detectDebianSource,
  ensureBaseImage,
  findMirror,
} from './setup/base-image.js';
export type { BaseImageOptions, BaseImageResult, DebianSource } from './setup/base-image.js';
