// File tools: read_file and write_file go through the worker (the same rules as the mount), list_files
// lists inside the sandbox (so hidden entries never show), explain answers from the sandbox's rules.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { posix } from 'node:path';
import { NotFoundError, PermissionDeniedError, compileRules } from '@agentfense/protocol';
import type { ToolCall, ToolDefinition } from './context.js';
import { capText } from './output.js';
import { sandboxPath, toCodebasePath } from './paths.js';
import { failure, ok } from './results.js';

/** Characters of a file returned by read_file before its middle is cut. */
export const MAX_FILE_CHARS = 100_000;
/** Entries list_files returns at most. */
export const MAX_LIST_ENTRIES = 2000;

const pathSchema = (what: string): object => ({
  type: 'string',
  description: `${what}: relative to the codebase root (e.g. "src/app.py") or absolute under /workspace.`,
});

function notFound(input: string): NotFoundError {
  return new NotFoundError(
    `${JSON.stringify(input)} not found: it does not exist, or the sandbox's rules hide it (use list_files to see what exists)`,
  );
}

/** The worker's errors (`EACCES: writeFile /src/a: permission is read`) restated for a model. */
function explained(err: unknown, input: string, what: 'read' | 'write'): unknown {
  if (err instanceof NotFoundError) return notFound(input);
  if (err instanceof PermissionDeniedError) {
    return new PermissionDeniedError(
      `the sandbox's rules do not let you ${what} ${JSON.stringify(input)} (${err.message}); call explain with this path to see the deciding rule`,
    );
  }
  return err;
}

/** Text unless it holds NUL bytes or is not valid UTF-8. */
function asText(data: Buffer): string | undefined {
  if (data.subarray(0, 8192).includes(0)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(data);
  } catch {
    return undefined;
  }
}

async function readFile(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const input = args.path as string;
  const path = toCodebasePath(input);
  if (path === '/')
    return failure('AF_INVALID_ARGUMENT', 'that is the codebase root, a directory: use list_files');
  const data = await call.sandbox.backend.readFile(call.sandbox.sandboxId, path).catch((err: unknown) => {
    throw explained(err, input, 'read');
  });
  const text = asText(data);
  if (text === undefined) {
    return ok(`${sandboxPath(path)} is a binary file of ${data.length} bytes (not shown)`, {
      path: sandboxPath(path),
      size: data.length,
      binary: true,
    });
  }
  const capped = capText(text, MAX_FILE_CHARS, 'use `run` with sed -n or head/tail to read parts');
  return ok(capped.text, { path: sandboxPath(path), size: data.length, truncated: capped.truncated });
}

async function writeFile(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const path = toCodebasePath(args.path as string);
  if (path === '/') return failure('AF_INVALID_ARGUMENT', 'path must name a file, not the codebase root');
  const content = args.content as string;
  const { backend, sandboxId } = call.sandbox;
  try {
    await backend.writeFile(sandboxId, path, content);
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw explained(err, args.path as string, 'write');
    // A missing parent directory: create it the way the agent would (inside the sandbox, so the rules
    // decide), then write again.
    const parent = sandboxPath(posix.dirname(path));
    const made = await backend.exec(sandboxId, ['mkdir', '-p', '--', parent], { timeoutMs: 30_000 });
    if (made.exitCode !== 0) {
      throw new PermissionDeniedError(
        `cannot create the directory ${parent} for ${sandboxPath(path)}: ${made.stderr.toString('utf8').trim()} (use explain to see the rule)`,
      );
    }
    await backend.writeFile(sandboxId, path, content).catch((again: unknown) => {
      throw explained(again, args.path as string, 'write');
    });
  }
  const size = Buffer.byteLength(content);
  return ok(
    `wrote ${size} bytes to ${sandboxPath(path)} (in the sandbox's change set; the real codebase is unchanged until a commit)`,
    { path: sandboxPath(path), size },
  );
}

const KIND: Readonly<Record<string, string>> = { d: 'directory', f: 'file', l: 'symlink' };

async function listFiles(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const input = (args.path as string | undefined) ?? '.';
  const root = sandboxPath(toCodebasePath(input));
  const depth = (args.max_depth as number | undefined) ?? 1;
  // find runs inside the sandbox, so it sees exactly what the agent's commands see; NUL-separated
  // records survive any file name.
  const result = await call.sandbox.backend.exec(
    call.sandbox.sandboxId,
    ['find', root, '-mindepth', '0', '-maxdepth', String(depth), '-printf', '%y %s %P\\0'],
    { timeoutMs: 60_000, signal: call.signal },
  );
  const records = result.stdout
    .toString('utf8')
    .split('\0')
    .filter((r) => r !== '');
  const top = records.find((r) => /^\S+ \d+ $/.test(r));
  if (top === undefined) {
    if (/No such file or directory/.test(result.stderr.toString('utf8'))) throw notFound(input);
    return failure('AF_INTERNAL', `listing ${root} failed: ${result.stderr.toString('utf8').trim()}`);
  }
  if (!top.startsWith('d ')) {
    return failure('AF_INVALID_ARGUMENT', `${root} is not a directory: use read_file to read it`);
  }
  const entries = records
    .filter((r) => r !== top)
    .map((r) => {
      const [type = '?', size = '0', ...name] = r.split(' ');
      return { path: name.join(' '), type: KIND[type] ?? 'other', size: Number(size) };
    })
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const shown = entries.slice(0, MAX_LIST_ENTRIES);
  const lines = shown.map((e) =>
    e.type === 'directory'
      ? `${e.path}/`
      : e.type === 'file'
        ? `${e.path}  (${e.size} bytes)`
        : `${e.path}  (${e.type})`,
  );
  const more =
    entries.length > shown.length
      ? `\n[... ${entries.length - shown.length} more entries not shown; list a subdirectory or lower max_depth ...]`
      : '';
  const problems = result.stderr.toString('utf8').trim();
  const text = `${root}:\n${lines.length === 0 ? '(empty)' : lines.join('\n')}${more}${
    problems === '' ? '' : `\nsome entries could not be listed:\n${problems}`
  }`;
  return ok(text, { path: root, entries: shown, truncated: entries.length > shown.length });
}

const MEANING: Readonly<Record<string, string>> = {
  none: 'hidden (does not exist for the agent)',
  view: 'view (listed, content unreadable)',
  read: 'read (readable, not writable)',
  write: 'write (readable and writable)',
};

async function explainPaths(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const info = await call.sandbox.backend.getSandbox(call.sandbox.sandboxId);
  const rules = compileRules(info.rules);
  const results = (args.paths as string[]).map((input) => {
    const e = rules.explain(toCodebasePath(input));
    return {
      path: sandboxPath(e.path),
      permission: e.permission,
      traversable: e.traversable,
      rule: e.rule === null ? null : { ...e.rule },
    };
  });
  const text = results
    .map((r) => {
      const meaning = MEANING[r.permission] ?? r.permission;
      const dir = r.permission === 'none' && r.traversable ? '; as a directory it stays traversable' : '';
      const why =
        r.rule === null
          ? 'no rule matched (default deny)'
          : `rule #${r.rule.index} ${r.rule.type} ${r.rule.pattern} -> ${r.rule.permission} (priority ${r.rule.priority})`;
      return `${r.path}: ${meaning}${dir} - ${why}`;
    })
    .join('\n');
  return ok(text, { results });
}

export const FILE_TOOLS: readonly ToolDefinition[] = [
  {
    name: 'read_file',
    title: 'Read a file',
    description:
      'Read a text file of the codebase as the sandbox sees it: your own changes included, through the permission rules. A hidden path is reported as not found; a path you may only view (names, not content) is refused. Long files are cut in the middle with a note.',
    inputSchema: {
      type: 'object',
      properties: { path: pathSchema('The file') },
      required: ['path'],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    handler: readFile,
  },
  {
    name: 'write_file',
    title: 'Write a file',
    description:
      "Create or replace a file with the given UTF-8 content, if the permission rules let you write there (otherwise the error says so; `explain` shows the rule). The write goes to the sandbox's change set: see it with `changes`; the real codebase is untouched until a commit.",
    inputSchema: {
      type: 'object',
      properties: {
        path: pathSchema('The file'),
        content: { type: 'string', description: 'The complete new content of the file.' },
      },
      required: ['path', 'content'],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    handler: writeFile,
  },
  {
    name: 'list_files',
    title: 'List files',
    description:
      'List the entries of a directory in the sandbox (directories end with "/", files show their size). Hidden paths are not listed; a hidden or missing directory is reported as not found.',
    inputSchema: {
      type: 'object',
      properties: {
        path: pathSchema('The directory (default: the codebase root)'),
        max_depth: {
          type: 'integer',
          minimum: 1,
          maximum: 20,
          description: 'How many levels to descend (default 1: only the directory itself).',
        },
      },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    handler: listFiles,
  },
  {
    name: 'explain',
    title: 'Explain permissions',
    description:
      'Tell what the sandbox allows for each path (hidden, view, read or write) and which permission rule decided it. Use it to understand a "Permission denied" or a missing file before trying something else.',
    inputSchema: {
      type: 'object',
      properties: {
        paths: {
          type: 'array',
          items: { type: 'string' },
          minItems: 1,
          maxItems: 100,
          description:
            'Paths relative to the codebase root or absolute under /workspace, e.g. ["src/app.py", ".env"].',
        },
      },
      required: ['paths'],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    handler: explainPaths,
  },
];
