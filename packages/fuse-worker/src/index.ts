// Public API of @agentfense/fuse-worker: start and drive a worker process (control side), and the mount
// helpers the control plane needs to clear dead mounts.
export {
  WORKER_BUNDLE,
  WORKER_ENTRY,
  WORKER_NODE_FLAGS,
  WorkerHandle,
  setPriority,
  spawnWorker,
  workerProgram,
} from './handle.js';
export type { SpawnWorkerOptions, WorkerExit } from './handle.js';
// Workers spawned ahead of time (one host's control plane, a cluster node's agent).
export { DEFAULT_WORKER_POOL_SIZE, WorkerPool } from './worker-pool.js';
export type { WorkerPoolOptions } from './worker-pool.js';
export { POOL_WORKER_NAME } from './pool-worker.js';
export { abortFuseConnection, clearFuseMount, fuseMountsAt, isFuseMounted, listMounts } from './mounts.js';
export type { MountInfo } from './mounts.js';
export { removeTree } from './host/walk.js';
export {
  WORKER_CGROUP_PARENT,
  createWorkerCgroup,
  parseOomKillCount,
  removeWorkerCgroup,
  workerMemoryBound,
} from './worker-cgroup.js';
export type { WorkerCgroup, WorkerMemoryOptions } from './worker-cgroup.js';
export { identityOf, openPinnedDir } from './host/pinned-dir.js';
export type { PinnedDirOptions } from './host/pinned-dir.js';
// A delta's unfinished commit (its intent record): nothing may remove such a delta unasked.
export { readPendingCommit } from './delta/commit-journal.js';
export type { PendingCommit } from './delta/commit-journal.js';
// A fork's delta, made on a checkpoint's frozen layers before its first mount.
export { initDeltaStack } from './delta/init-stack.js';
// The stack a delta records itself (a compaction's recovery reads it).
export { readStack } from './delta/layer-stack.js';
// What a frozen layer costs in the disk quota's measure (charged to the sandbox that made it).
export { layerBytes } from './delta/layer-bytes.js';
// Supervision of a running sandbox's worker: restart over the same delta, give up after repeated failures.
export { DEFAULT_SUPERVISION, WorkerSupervisor, spawnAndMount } from './supervision/supervisor.js';
export type {
  SupervisionOptions,
  SupervisorLogger,
  WorkerSupervisorOptions,
} from './supervision/supervisor.js';
export { exitReasonOf, explainedCall } from './supervision/worker-exit.js';
export { requestWholeOn } from './supervision/whole-answer.js';
