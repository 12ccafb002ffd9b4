// Public API of @agentfense/runtime-docker.
export {};
