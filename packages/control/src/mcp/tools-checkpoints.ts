// Checkpoints for an agent: `checkpoint` before a risky step, `rollback` after a failed one, `checkpoints`
// to see where it can go back to. They act on the sandbox's own files only (never the real codebase), so
// they are offered without --allow-commit.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { CheckpointInfo } from '../sandboxes/checkpoints.js';
import type { ToolCall, ToolDefinition } from './context.js';
import { failure, ok } from './results.js';

function line(cp: CheckpointInfo): string {
  const label = [cp.name, cp.message].filter((s) => s !== null).join(': ');
  return `${cp.id}  ${new Date(cp.createdAt).toISOString()}${label === '' ? '' : `  ${label}`}`;
}

function data(cp: CheckpointInfo): Record<string, unknown> {
  return { id: cp.id, name: cp.name, message: cp.message, created_at: new Date(cp.createdAt).toISOString() };
}

async function checkpoint(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const cp = await call.sandbox.backend.checkpoint(call.sandbox.sandboxId, {
    ...(typeof args.name === 'string' ? { name: args.name } : {}),
    ...(typeof args.message === 'string' ? { message: args.message } : {}),
  });
  return ok(
    `checkpoint ${cp.id} taken: rollback with this id comes back to the files as they are now`,
    data(cp),
  );
}

async function checkpoints(_args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const list = await call.sandbox.backend.listCheckpoints(call.sandbox.sandboxId);
  return ok(
    list.length === 0 ? 'no checkpoints yet' : `checkpoints, oldest first:\n${list.map(line).join('\n')}`,
    { checkpoints: list.map(data) },
  );
}

async function rollback(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const { backend, sandboxId } = call.sandbox;
  let id = typeof args.checkpoint_id === 'string' ? args.checkpoint_id : undefined;
  if (id === undefined) {
    id = (await backend.listCheckpoints(sandboxId)).at(-1)?.id;
    if (id === undefined) {
      return failure(
        'AF_WRONG_STATE',
        'there is no checkpoint to roll back to: take one with `checkpoint` first',
      );
    }
  }
  const { kept } = await backend.restoreCheckpoint(sandboxId, id, {
    keepCurrent: args.keep_current === true,
  });
  return ok(
    `rolled back to checkpoint ${id}: the files are as they were then` +
      (kept === undefined
        ? '; the changes made since were dropped'
        : `; the changes made since are checkpoint ${kept.id}`),
    { restored: id, ...(kept === undefined ? {} : { kept: data(kept) }) },
  );
}

export const CHECKPOINT_TOOLS: readonly ToolDefinition[] = [
  {
    name: 'checkpoint',
    title: 'Take a checkpoint',
    description:
      "Freeze the sandbox's files as they are now (instant, nothing copied), to come back to them with `rollback` if a later step goes wrong. Affects only the sandbox, never the real codebase.",
    inputSchema: {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 200, description: 'A short label.' },
        message: { type: 'string', maxLength: 4000, description: 'What the steps before it did.' },
      },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false },
    handler: checkpoint,
  },
  {
    name: 'checkpoints',
    title: 'List checkpoints',
    description: "The sandbox's checkpoints, oldest first, with their ids for `rollback`.",
    inputSchema: { type: 'object', properties: {}, additionalProperties: false },
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    handler: checkpoints,
  },
  {
    name: 'rollback',
    title: 'Roll back to a checkpoint',
    description:
      "Put the sandbox's files back to a checkpoint (default: the latest). The changes made since are dropped unless `keep_current` keeps them as a checkpoint of their own. Running commands see the restored files at once. Affects only the sandbox, never the real codebase.",
    inputSchema: {
      type: 'object',
      properties: {
        checkpoint_id: {
          type: 'string',
          description: 'cp_<uuid> from `checkpoint` or `checkpoints`; default: the latest.',
        },
        keep_current: { type: 'boolean', description: 'Keep the changes made since as a checkpoint.' },
      },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: false },
    handler: rollback,
  },
];
