// Public API of @agentfense/fuse-worker.
export {};
