// @agentfense/network: a sandbox's network policy (types, validation, presets, decisions) and the host
// side of its enforcement (the namespace and the policy point's process).
export {
  NETWORK_MODES,
  NETWORK_NONE,
  normalizeCidr,
  normalizeHostPattern,
  parseHostFlag,
  validateNetworkPolicy,
} from './policy.js';
export type { NetworkMode, NetworkPolicy, NetworkPolicyInput, NetworkRule } from './policy.js';
export { NETWORK_PRESETS } from './presets.js';
export type { NetworkPreset } from './presets.js';
export { CompiledPolicy, describeRule } from './decide.js';
export type { Decision, Destination } from './decide.js';
export { classifyAddress } from './addresses.js';
export type { AddressClass } from './addresses.js';
export type { NetworkAuditEvent } from './audit.js';
export { DEFAULT_MAX_CONNECTIONS, SandboxNetwork, netnsPathOf } from './host.js';
export type { NetworkMemoryOptions, NetworkOptions, PolicyPointExit, SandboxNetworkOptions } from './host.js';
export { DNS_PORT, PROXY_ENV, PROXY_PORT, PROXY_URL, removeSandboxNetns } from './netns.js';
export { isDumpable, markNotDumpable, openSocketInNetns } from './native.js';
export {
  PLACEHOLDER_PREFIX,
  hostMatches,
  placeholderEnv,
  secretBinding,
  validateSecret,
  validateSecrets,
  withPlaceholders,
} from './secrets.js';
export type { SandboxSecret, SecretBinding, SecretInput } from './secrets.js';
export { createSandboxCa } from './ca.js';
export type { SandboxCaOptions, SandboxCaPem } from './ca.js';
export type { SecretSetOptions } from './secret-set.js';
export { swapBytes } from './swap.js';
export type { Swap } from './swap.js';
