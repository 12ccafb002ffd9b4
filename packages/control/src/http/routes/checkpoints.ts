// Checkpoints over HTTP (our own routes, docs/checkpoints.md): take one, list them, restore one, delete
// one. A checkpoint freezes the sandbox's files as they are; restoring puts them back at once.
import type { FastifyInstance } from 'fastify';
import type { CheckpointInfo } from '../../sandboxes/checkpoints.js';
import type { HttpBackend } from '../backend.js';
import {
  Checkpoint,
  CheckpointParams,
  CreateCheckpointBody,
  ListCheckpointsResult,
  RestoreCheckpointBody,
  RestoreCheckpointResult,
  forkBody,
  forkResult,
} from '../checkpoint-schemas.js';
import { defineRoute } from '../define.js';
import { pathId, resourcesFromWire, rulesFromWire, sandboxToWire } from '../mapping.js';
import type { WireResources, WireRuleIn } from '../mapping.js';
import { Empty, IdParams, PermissionRuleIn, Resources, Sandbox } from '../schemas.js';

const tags = ['checkpoints'];

type IdParam = { id: string };
type CheckpointParam = { id: string; checkpoint_id: string };

interface ForkBody {
  checkpoint_id?: string;
  count?: number;
  permissions?: WireRuleIn[];
  preset?: string;
  resources?: WireResources;
  no_start?: boolean;
}

/** A checkpoint in the API's snake_case, its time as RFC 3339. */
export function checkpointToWire(cp: CheckpointInfo): Record<string, unknown> {
  return {
    id: cp.id,
    sandbox_id: cp.sandboxId,
    name: cp.name,
    message: cp.message,
    depth: cp.depth,
    created_at: new Date(cp.createdAt).toISOString(),
  };
}

export function registerCheckpointRoutes(app: FastifyInstance, backend: HttpBackend): void {
  defineRoute<{ name?: string; message?: string }, unknown, IdParam>(app, {
    method: 'POST',
    url: '/v1/sandboxes/:id/checkpoints',
    operationId: 'CreateCheckpoint',
    summary: "Freeze the sandbox's files as they are now (no copying); the sandbox goes on unchanged",
    tags,
    params: IdParams('sandbox', 'sb'),
    body: CreateCheckpointBody,
    optionalBody: true,
    response: Checkpoint,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      return checkpointToWire(await backend.checkpoint(id, req.body));
    },
  });

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'GET',
    url: '/v1/sandboxes/:id/checkpoints',
    operationId: 'ListCheckpoints',
    summary: "The sandbox's checkpoints, oldest first",
    tags,
    params: IdParams('sandbox', 'sb'),
    response: ListCheckpointsResult,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      return { checkpoints: (await backend.listCheckpoints(id)).map(checkpointToWire) };
    },
  });

  defineRoute<{ keep_current?: boolean }, unknown, CheckpointParam>(app, {
    method: 'POST',
    url: '/v1/sandboxes/:id/checkpoints/:checkpoint_id/restore',
    operationId: 'RestoreCheckpoint',
    summary:
      "Put the sandbox's files back to a checkpoint (running commands see them at once); the changes since are dropped unless `keep_current`",
    tags,
    params: CheckpointParams,
    body: RestoreCheckpointBody,
    optionalBody: true,
    response: RestoreCheckpointResult,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      const checkpoint = pathId('checkpoint', req.params.checkpoint_id);
      const { kept } = await backend.restoreCheckpoint(id, checkpoint, {
        keepCurrent: req.body.keep_current === true,
      });
      return kept === undefined ? {} : { kept: checkpointToWire(kept) };
    },
  });

  defineRoute<unknown, unknown, CheckpointParam>(app, {
    method: 'DELETE',
    url: '/v1/sandboxes/:id/checkpoints/:checkpoint_id',
    operationId: 'DeleteCheckpoint',
    summary: 'Delete a checkpoint; its files go once no other checkpoint holds them',
    tags,
    params: CheckpointParams,
    response: Empty,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      await backend.deleteCheckpoint(id, pathId('checkpoint', req.params.checkpoint_id));
      return {};
    },
  });

  defineRoute<ForkBody, unknown, IdParam>(app, {
    method: 'POST',
    url: '/v1/sandboxes/:id/fork',
    operationId: 'ForkSandbox',
    summary:
      "New sandboxes whose files start as a checkpoint (default: the sandbox's files now), each with changes of its own",
    tags,
    params: IdParams('sandbox', 'sb'),
    body: forkBody(PermissionRuleIn, Resources),
    optionalBody: true,
    response: forkResult(Sandbox),
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      const b = req.body;
      const forks = await backend.forkSandbox(id, {
        ...(b.checkpoint_id === undefined ? {} : { checkpointId: pathId('checkpoint', b.checkpoint_id) }),
        ...(b.count === undefined ? {} : { count: b.count }),
        ...(b.permissions === undefined ? {} : { rules: rulesFromWire(b.permissions) }),
        ...(b.preset === undefined ? {} : { preset: b.preset }),
        ...(b.resources === undefined ? {} : { resources: resourcesFromWire(b.resources) }),
        start: b.no_start !== true,
      });
      return { sandboxes: forks.map(sandboxToWire) };
    },
  });
}
