// Public API of @agentfense/runtime-bwrap: the bwrap SandboxRuntime and the pieces worth testing alone.

// --- Runtime ---
export { createBwrapRuntime, DEFAULT_RUN_DIR } from './runtime.js';
// --- Host identity of sandbox processes (never root), seccomp, workspace relay ---
export { DEFAULT_SANDBOX_USER, SANDBOX_USER_ENV, resolveSandboxUser } from './host/sandbox-user.js';
export type { HostIdentity } from './host/sandbox-user.js';
export { DEFAULT_SECCOMP_COMPILER, loadSeccompFilter } from './exec/seccomp.js';
export type { BwrapRuntimeOptions } from './runtime.js';
export type { RuntimeLogger } from './logger.js';

// --- bwrap argv (pure) ---
export {
  buildBwrapArgs,
  commandArgv,
  BASE_ENV,
  SANDBOX_UID,
  SANDBOX_GID,
  SANDBOX_HOME,
  SANDBOX_HOSTNAME,
  WORKSPACE_DIR,
} from './exec/args.js';
export type { BwrapSpec, SystemMount, CgroupHandshakeFds } from './exec/args.js';
export { DEFAULT_SYSTEM_DIRS, resolveSystemMounts } from './sandbox-fs/system-mounts.js';
export type { ResolveSystemMountsOptions } from './sandbox-fs/system-mounts.js';
export { DEFAULT_ETC_ENTRIES, generatedEtcContents, prepareSandboxEtc } from './sandbox-fs/etc-files.js';
export type { PrepareEtcOptions } from './sandbox-fs/etc-files.js';
// Input validation is shared with runtime-docker (from @agentfense/protocol, re-exported for callers).
export { validateCwd, validateEnv } from '@agentfense/protocol';

// --- Audit records ---
export { maskArgv } from './exec/audit.js';
// The masking core, with bwrap's path boundaries (its default).
export { maskHostPaths } from '@agentfense/protocol';
export type { PathPlaceholder, MaskArgvOptions } from '@agentfense/protocol';

// --- Cgroups ---
export { createSandboxCgroup, DEFAULT_CGROUP_PARENT } from './cgroups/create.js';
export type { CreateSandboxCgroupOptions } from './cgroups/create.js';
export { detectCgroupHost } from '@agentfense/protocol';
export type { CgroupHost, CgroupController } from '@agentfense/protocol';
export { planCgroups, validateLimits } from './cgroups/plan.js';
export type { CgroupPlan } from './cgroups/plan.js';
export type { SandboxCgroup } from './cgroups/types.js';
