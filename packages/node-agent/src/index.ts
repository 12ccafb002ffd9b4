// @agentfense/node-agent: the node agent of a cluster deployment (`agentfense node`). For each sandbox the
// orchestrator placed on this node it runs the FUSE worker, attaches the view inside the sandbox's
// container, and relays exec and sessions to af-init; it serves the API tier over an authenticated HTTP API.
export { DEFAULT_BLOB_CACHE_BYTES, startNodeAgent } from './node-agent.js';
export type { NodeAgent, NodeAgentOptions } from './node-agent.js';
export { NodeAgentCore } from './agent.js';
export type { NodeHealth } from './agent.js';
export { MIN_TOKEN_LENGTH } from './auth.js';
export type { CleanupReport } from './cleanup.js';
export { checkSandboxId, resolveCodebase } from './paths.js';
export { LAUNCHER_NAME, WORKSPACE_NAME, afMountnsPath } from './mountns.js';
export { SANDBOX_WAIT_COMMAND } from './container-command.js';
