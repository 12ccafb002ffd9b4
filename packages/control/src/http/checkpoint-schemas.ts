// JSON Schemas of checkpoints in the HTTP API (our own routes): a checkpoint as answered, and the bodies
// that take or restore one.
import { object, outObject } from './schema-builders.js';
import type { Schema } from './schema-builders.js';

export const Checkpoint = outObject('Checkpoint', {
  id: { type: 'string', description: 'cp_<uuid>' },
  sandbox_id: { type: 'string' },
  name: { type: ['string', 'null'] },
  message: { type: ['string', 'null'] },
  depth: { type: 'integer', description: 'frozen layers in its stack (its own is the last)' },
  created_at: { type: 'string', description: 'RFC 3339 time' },
});

export const CreateCheckpointBody = object('CreateCheckpointRequest', {
  name: { type: 'string', maxLength: 200, description: 'a short label' },
  message: { type: 'string', maxLength: 4000, description: 'what the step before it did' },
});

export const ListCheckpointsResult = outObject('ListCheckpointsResponse', {
  checkpoints: { type: 'array', items: Checkpoint, description: 'oldest first' },
});

export const RestoreCheckpointBody = object('RestoreCheckpointRequest', {
  keep_current: {
    type: 'boolean',
    description: 'keep the changes made since as a checkpoint of their own (returned as `kept`)',
  },
});

export const RestoreCheckpointResult = object('RestoreCheckpointResponse', {
  kept: Checkpoint,
});

export const CheckpointParams = object(
  'CheckpointParams',
  {
    id: { type: 'string', description: 'the sandbox id, sb_<uuid>' },
    checkpoint_id: { type: 'string', description: 'the checkpoint id, cp_<uuid>' },
  },
  ['id', 'checkpoint_id'],
);

/** A fork's body: the parent's settings unless given (the permission rule schema is the create's). */
export const forkBody = (permissionRule: Schema, resources: Schema): Schema =>
  object('ForkSandboxRequest', {
    checkpoint_id: {
      type: 'string',
      description: "fork from this checkpoint (default: the sandbox's files now, checkpointed for it)",
    },
    count: { type: 'integer', minimum: 1, maximum: 32, description: 'how many sandboxes (default 1)' },
    permissions: { type: 'array', items: permissionRule, description: 'exclusive with preset' },
    preset: { type: 'string', description: "a preset name (default: the parent's rules)" },
    resources,
    no_start: { type: 'boolean', description: 'leave them PENDING (default: started at once)' },
  });

export const forkResult = (sandbox: Schema): Schema =>
  outObject('ForkSandboxResponse', { sandboxes: { type: 'array', items: sandbox } });
