// Public API of @agentfense/runtime-bwrap.
export {};
