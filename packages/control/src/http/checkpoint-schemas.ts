// JSON Schemas of checkpoints in the HTTP API (our own routes): a checkpoint as answered, and the bodies
// that take or restore one.
import { object, outObject } from './schema-builders.js';

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
