// Public API of @agentfense/control.
export {};
