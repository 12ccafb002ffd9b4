// Checkpoints between the control plane's shape and sandbox.v1's messages (checkpoint.proto).
import type { CheckpointInfo } from '../sandboxes/checkpoints.js';
import type { Checkpoint } from './gen/sandbox/v1/checkpoint.js';

export function checkpointToProto(cp: CheckpointInfo): Checkpoint {
  return {
    id: cp.id,
    sandboxId: cp.sandboxId,
    name: cp.name ?? '',
    message: cp.message ?? '',
    depth: cp.depth,
    createdAt: new Date(cp.createdAt),
  };
}
