// The change set: `changes` shows it (list + unified diff), `commit` applies it to the real codebase and
// `discard` drops it. The last two exist only when the server was started with --allow-commit.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ChangeEntry } from '@agentfense/protocol';
import { changeLine } from '@agentfense/protocol/core';
import type { McpSandboxContext, ToolCall, ToolDefinition } from './context.js';
import { capText } from './output.js';
import { toCodebasePath } from './paths.js';
import { failure, ok } from './results.js';

/** Characters of a diff returned before its middle is cut. */
export const MAX_DIFF_CHARS = 100_000;

function summary(changes: readonly ChangeEntry[]): string {
  if (changes.length === 0) return 'no changes';
  return changes.map(changeLine).join('\n');
}

/** The change list and the unified diff of a sandbox, as text (also the delta resource). */
export async function deltaReport(
  sandbox: McpSandboxContext,
  paths?: readonly string[],
): Promise<{
  text: string;
  changes: readonly ChangeEntry[];
  diff: string;
  binary: readonly string[];
  truncated: boolean;
}> {
  const all = await sandbox.backend.changes(sandbox.sandboxId);
  const changes =
    paths === undefined
      ? all
      : all.filter((c) => paths.some((p) => p === '/' || c.path === p || c.path.startsWith(`${p}/`)));
  const { diff, binary } = await sandbox.backend.diff(
    sandbox.sandboxId,
    paths === undefined ? {} : { paths },
  );
  const capped = capText(diff, MAX_DIFF_CHARS, 'ask for fewer paths');
  const binaries = binary.map((p) => `Binary file ${p} differs`).join('\n');
  const text = `changes (A added, M modified, D deleted; paths from the codebase root):\n${summary(changes)}${
    capped.text === '' ? '' : `\n\n${capped.text}`
  }${binaries === '' ? '' : `\n${binaries}`}`;
  return { text, changes, diff: capped.text, binary, truncated: capped.truncated };
}

function pathsArg(args: Record<string, unknown>): string[] | undefined {
  const paths = args.paths as string[] | undefined;
  return paths?.map((p) => toCodebasePath(p));
}

const pathsSchema = {
  type: 'array',
  items: { type: 'string' },
  minItems: 1,
  description: 'Only these files or directories (relative to the codebase root). Default: everything.',
};

async function changes(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const report = await deltaReport(call.sandbox, pathsArg(args));
  return ok(report.text, {
    changes: report.changes.map((c) => ({ ...c })),
    diff: report.diff,
    binary: [...report.binary],
    truncated: report.truncated,
  });
}

async function commit(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const paths = pathsArg(args);
  const mode = (args.mode as 'detect-conflicts' | 'last-writer-wins' | undefined) ?? 'detect-conflicts';
  const result = await call.sandbox.backend.commit(call.sandbox.sandboxId, {
    mode,
    ...(paths === undefined ? {} : { paths }),
  });
  const applied = result.applied.map((c) => `  ${changeLine(c)}`).join('\n');
  const data = {
    applied: result.applied.map((c) => c.path),
    conflicts: result.conflicts.map((c) => ({ ...c })),
    ...(result.interrupted === undefined ? {} : { interrupted: result.interrupted }),
  };
  if (result.interrupted !== undefined) {
    // Stopped or destroyed meanwhile: say so, or a partial commit reads as a complete one.
    return ok(
      `the commit stopped part-way (${result.interrupted}); only these ${result.applied.length} change(s) were written:\n${applied}`,
      data,
    );
  }
  if (result.conflicts.length > 0) {
    const list = result.conflicts.map((c) => `  ${c.path}: ${c.reason}`).join('\n');
    return failure(
      'AF_CONFLICT',
      `${result.conflicts.length} change(s) were NOT written because the real codebase changed there since the sandbox started; ${result.applied.length} other change(s) were applied. Compare the files, then commit those paths again with mode "last-writer-wins" to overwrite, or discard them.`,
      data,
      `not written:\n${list}${applied === '' ? '' : `\napplied:\n${applied}`}`,
    );
  }
  return ok(
    result.applied.length === 0
      ? 'nothing to commit: the change set is empty'
      : `committed ${result.applied.length} change(s) to the real codebase:\n${applied}`,
    data,
  );
}

async function discard(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const paths = pathsArg(args);
  await call.sandbox.backend.discard(call.sandbox.sandboxId, paths === undefined ? {} : { paths });
  return ok(
    paths === undefined
      ? 'discarded every change: the sandbox sees the codebase as it is again'
      : `discarded the changes under ${paths.join(', ')}`,
    { discarded: paths ?? 'all' },
  );
}

export const DELTA_TOOLS: readonly ToolDefinition[] = [
  {
    name: 'changes',
    title: 'Show changes',
    description:
      'Show what the sandbox changed compared with the real codebase: the list of added (A), modified (M) and deleted (D) paths and a unified diff of text files. Nothing reaches the real codebase until it is committed. The same report is the resource agentfense://sandbox/changes.',
    inputSchema: {
      type: 'object',
      properties: { paths: pathsSchema },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    handler: changes,
  },
  {
    name: 'commit',
    title: 'Commit changes',
    description:
      'Apply the sandbox\'s changes (all, or only `paths`) to the real codebase. By default a file that was also changed in the real codebase since the sandbox started is not overwritten: it is reported as a conflict (an error listing the paths); mode "last-writer-wins" overwrites instead. Committed changes leave the change set.',
    inputSchema: {
      type: 'object',
      properties: {
        paths: pathsSchema,
        mode: {
          type: 'string',
          enum: ['detect-conflicts', 'last-writer-wins'],
          description:
            'detect-conflicts (default) reports conflicting files; last-writer-wins overwrites them.',
        },
      },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: false },
    needsCommit: true,
    handler: commit,
  },
  {
    name: 'discard',
    title: 'Discard changes',
    description:
      "Throw away the sandbox's changes (all, or only `paths`): the sandbox sees those files as they are in the real codebase again. This cannot be undone.",
    inputSchema: {
      type: 'object',
      properties: { paths: pathsSchema },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    needsCommit: true,
    handler: discard,
  },
];
