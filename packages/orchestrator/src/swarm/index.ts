// The Docker Swarm adapter: a one-replica service per sandbox, placed by Swarm.
export { SwarmOrchestrator } from './adapter.js';
export type { SwarmNodeAgent, SwarmOrchestratorOptions } from './adapter.js';
export { swarmApiFrom, swarmError } from './engine.js';
export type { SwarmApi } from './engine.js';
export { MANAGED_BY, MANAGED_BY_LABEL, SANDBOX_ID_LABEL, buildServiceSpec, serviceName } from './objects.js';
export type { ServiceTemplate, SwarmNode, SwarmService, SwarmServiceSpec, SwarmTask } from './objects.js';
export { CLAIMED_BY_LABEL, SwarmWarmPool, WARM_LABEL } from './warm.js';
export type { SwarmWarmPoolOptions, WarmShape } from './warm.js';
