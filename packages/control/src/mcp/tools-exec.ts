// `run` (one command in a fresh process tree) and `shell` (a persistent shell: cd and export persist).
// A command's own failure (non-zero status) is a normal result the model reads; a timeout is a tool
// error that still carries the output so far, and the sandbox stays usable either way.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ExecResult } from '@agentfense/protocol';
import type { SessionExecResult } from '@agentfense/sessions';
import type { ToolCall, ToolDefinition } from './context.js';
import { capBytes } from './output.js';
import { commandCwd } from './paths.js';
import { failure, ok } from './results.js';

/** `timeout_seconds` when the model gives none: below the MCP SDK clients' default request timeout (60 s). */
export const DEFAULT_TIMEOUT_SECONDS = 30;
/** Largest `timeout_seconds`; longer jobs belong in the background with output to a file. */
export const MAX_TIMEOUT_SECONDS = 1800;

const timeoutSchema = {
  type: 'number',
  exclusiveMinimum: 0,
  maximum: MAX_TIMEOUT_SECONDS,
  description: `Kill the command after this many seconds (default ${DEFAULT_TIMEOUT_SECONDS}, at most ${MAX_TIMEOUT_SECONDS}).`,
};

const HINT = 'redirect output to a file under /workspace/output or /tmp and read parts of it';

interface Output {
  readonly stdout: string;
  readonly stderr: string;
  readonly truncated: boolean;
}

function output(stdout: Buffer, stderr: Buffer): Output {
  const out = capBytes(stdout, undefined, HINT);
  const err = capBytes(stderr, undefined, HINT);
  return { stdout: out.text, stderr: err.text, truncated: out.truncated || err.truncated };
}

function streams(o: Output): string {
  const block = (name: string, text: string): string =>
    text === '' ? `${name}: (empty)\n` : `--- ${name} ---\n${text}${text.endsWith('\n') ? '' : '\n'}`;
  return `${block('stdout', o.stdout)}${block('stderr', o.stderr)}`;
}

function seconds(args: Record<string, unknown>): number {
  return (args.timeout_seconds as number | undefined) ?? DEFAULT_TIMEOUT_SECONDS;
}

async function run(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const timeout = seconds(args);
  const cwd = commandCwd(args.cwd as string | undefined);
  const env = args.env as Record<string, string> | undefined;
  const result: ExecResult = await call.sandbox.backend.exec(call.sandbox.sandboxId, args.command as string, {
    timeoutMs: Math.round(timeout * 1000),
    signal: call.signal,
    ...(cwd === undefined ? {} : { cwd }),
    ...(env === undefined ? {} : { env }),
  });
  const o = output(result.stdout, result.stderr);
  const data = {
    exit_code: result.exitCode,
    signal: result.signal,
    timed_out: result.timedOut,
    oom_killed: result.oomKilled,
    duration_ms: Math.round(result.durationMs),
    stdout: o.stdout,
    stderr: o.stderr,
    truncated: o.truncated,
  };
  if (result.timedOut) {
    return failure(
      'AF_TIMEOUT',
      `the command did not finish within ${timeout} s and was killed with everything it started; raise timeout_seconds (at most ${MAX_TIMEOUT_SECONDS}) or start long jobs in the background with their output in a file`,
      data,
      streams(o),
    );
  }
  if (result.cancelled) return failure('AF_CANCELLED', 'the command was cancelled', data, streams(o));
  const status =
    result.exitCode !== null ? `exit code: ${result.exitCode}` : `killed by ${result.signal ?? 'a signal'}`;
  const oom = result.oomKilled ? ' (killed for exceeding the memory limit)' : '';
  return ok(`${status}${oom}\n${streams(o)}`, data);
}

async function shell(args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
  const { backend, sandboxId } = call.sandbox;
  const command = args.command as string | undefined;
  const notes: string[] = [];
  if (args.reset === true && call.shell.sessionId !== undefined) {
    await backend.closeSession(call.shell.sessionId).catch(() => undefined);
    call.shell.sessionId = undefined;
  }
  if (command === undefined && args.reset !== true) {
    return failure(
      'AF_INVALID_ARGUMENT',
      'give `command` (a shell line), or `reset: true` to start a fresh shell',
    );
  }
  let id = call.shell.sessionId;
  if (id !== undefined) {
    const info = await backend.getSession(id);
    if (info.status !== 'open') {
      notes.push(
        `(the previous shell had closed: ${info.closedReason ?? 'unknown reason'}; this is a fresh one)`,
      );
      id = undefined;
    }
  }
  if (id === undefined) {
    id = (await backend.createSession(sandboxId, {})).id;
    call.shell.sessionId = id;
    if (args.reset === true) notes.push('(started a fresh shell in /workspace)');
  }
  if (command === undefined) return ok(notes.join('\n'), { reset: true });
  const timeout = seconds(args);
  const result: SessionExecResult = await backend.sessionExec(id, command, {
    timeoutMs: Math.round(timeout * 1000),
  });
  const o = output(result.stdout, result.stderr);
  if (result.sessionClosed) {
    call.shell.sessionId = undefined;
    notes.push('(the shell exited; the next call starts a fresh one)');
  }
  const data = {
    exit_code: result.exitCode,
    timed_out: result.timedOut,
    duration_ms: Math.round(result.durationMs),
    stdout: o.stdout,
    stderr: o.stderr,
    truncated: o.truncated || result.truncated,
    shell_closed: result.sessionClosed,
  };
  const text = `${notes.map((n) => `${n}\n`).join('')}${streams(o)}`;
  if (result.timedOut) {
    return failure(
      'AF_TIMEOUT',
      `the command did not finish within ${timeout} s and was interrupted${
        result.sessionClosed
          ? '; the shell could not be interrupted and was killed'
          : ' (the shell is still there, with its directory and variables)'
      }; raise timeout_seconds or run long jobs in the background`,
      data,
      text,
    );
  }
  return ok(`exit code: ${result.exitCode ?? 'none'}\n${text}`, data);
}

export const EXEC_TOOLS: readonly ToolDefinition[] = [
  {
    name: 'run',
    title: 'Run a command',
    description:
      'Run one shell command (through /bin/sh -c) in the sandbox, a fresh process each time. The codebase is at /workspace (the default working directory); permission rules decide per path what is visible, readable and writable: hidden paths do not exist ("No such file or directory"), forbidden writes fail with "Permission denied" or "Read-only file system". Writes land in the sandbox\'s change set, not in the real codebase. The network follows the sandbox policy (none unless the operator gave one). Returns the exit code, stdout and stderr (long output is cut in the middle with a note). A non-zero exit code is a normal result; a command that exceeds timeout_seconds is killed and reported as an error. Use the `shell` tool when `cd` or `export` should persist between commands.',
    inputSchema: {
      type: 'object',
      properties: {
        command: {
          type: 'string',
          minLength: 1,
          description: 'The shell command line, e.g. "ls -la src && npm test".',
        },
        timeout_seconds: timeoutSchema,
        cwd: {
          type: 'string',
          description:
            'Working directory: relative to /workspace, or absolute inside the sandbox. Default /workspace.',
        },
        env: {
          type: 'object',
          additionalProperties: { type: 'string' },
          description: 'Extra environment variables for this command, e.g. {"CI": "1"}.',
        },
      },
      required: ['command'],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false },
    handler: run,
  },
  {
    name: 'shell',
    title: 'Run a command in a persistent shell',
    description:
      'Run a command in a persistent shell session in the sandbox: the working directory (cd), variables (export), functions and aliases carry over to the next call. It starts in /workspace under the same permission rules as `run`. On timeout the command is interrupted (like Ctrl-C) and the shell stays. Pass reset: true to throw the shell away and start a fresh one (with or without a command). Commands that read stdin get end-of-file.',
    inputSchema: {
      type: 'object',
      properties: {
        command: {
          type: 'string',
          minLength: 1,
          description: 'The shell line to run, e.g. "cd src && export DEBUG=1".',
        },
        timeout_seconds: timeoutSchema,
        reset: {
          type: 'boolean',
          description: 'Start a fresh shell first (directory back to /workspace, variables cleared).',
        },
      },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false },
    handler: shell,
  },
];
