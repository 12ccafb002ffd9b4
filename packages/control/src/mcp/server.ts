// The MCP server over one sandbox: tools/list, tools/call (arguments validated against each tool's JSON
// schema, every failure a tool result with isError), and the change set as a resource. Built on the
// SDK's low-level Server so the tools' schemas are plain JSON Schema and errors stay in our hands.
import { Ajv } from 'ajv';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { Logger } from 'pino';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { McpSandboxContext, ShellState, ToolDefinition } from './context.js';
import { failure, errorResult } from './results.js';
import { CHECKPOINT_TOOLS } from './tools-checkpoints.js';
import { DELTA_TOOLS, deltaReport } from './tools-delta.js';
import { EXEC_TOOLS } from './tools-exec.js';
import { FILE_TOOLS } from './tools-files.js';

/** The server's name and version in the initialize handshake. */
export const MCP_SERVER_INFO = { name: 'agentfense', version: '0.1.0' } as const;
/** The change set as a resource. */
export const CHANGES_RESOURCE_URI = 'agentfense://sandbox/changes';

/** Every tool, in the order they are listed. */
export const ALL_TOOLS: readonly ToolDefinition[] = [
  ...EXEC_TOOLS,
  ...FILE_TOOLS,
  ...DELTA_TOOLS,
  ...CHECKPOINT_TOOLS,
];

export interface McpServerOptions {
  readonly logger?: Logger;
}

/** An MCP server bound to a sandbox; close() ends its shell and aborts calls in flight. */
export interface SandboxMcpServer {
  readonly server: Server;
  readonly tools: readonly ToolDefinition[];
  close(): Promise<void>;
}

function instructions(sandbox: McpSandboxContext): string {
  return [
    'You work inside an AgentFense sandbox over a real codebase, mounted at /workspace.',
    'Permission rules decide per path what you may see, read and write: hidden files do not exist for you; use `explain` to see why a path is refused.',
    "Every write lands in the sandbox's change set; `changes` shows it as a diff.",
    sandbox.allowCommit
      ? '`commit` applies changes to the real codebase (conflicts are reported); `discard` drops them.'
      : 'Only the user can apply the changes to the real codebase.',
    "The network follows the sandbox's policy (none unless the operator gave one): a refused HTTP request gets a 403 naming the rule, other refused connections are reset, and names the policy does not allow do not resolve.",
  ].join(' ');
}

/** One validation failure as a sentence a model can act on. */
function describe(tool: ToolDefinition, error: ErrorObject | undefined): string {
  const args = Object.keys(tool.inputSchema.properties)
    .map((name) => (tool.inputSchema.required?.includes(name) === true ? `${name} (required)` : name))
    .join(', ');
  const where =
    error?.instancePath === '' ? '' : `argument "${error?.instancePath.slice(1).replace(/\//g, '.')}" `;
  let problem: string;
  if (error === undefined) problem = 'invalid arguments';
  else if (error.keyword === 'required')
    problem = `missing required argument "${String(error.params.missingProperty)}"`;
  else if (error.keyword === 'additionalProperties')
    problem = `unknown ${where === '' ? 'argument ' : `key in ${where}`}"${String(error.params.additionalProperty)}"`;
  else problem = `${where}${error.message ?? 'is invalid'}`;
  return `${tool.name}: ${problem}; its arguments are: ${args === '' ? 'none' : args}`;
}

/** Builds the server. The sandbox must be running; the caller owns it (and destroys it after close()). */
export function createSandboxMcpServer(
  sandbox: McpSandboxContext,
  options: McpServerOptions = {},
): SandboxMcpServer {
  const tools = ALL_TOOLS.filter((tool) => tool.needsCommit !== true || sandbox.allowCommit);
  const ajv = new Ajv({ allErrors: false, strict: true, coerceTypes: false, useDefaults: false });
  const validators = new Map<string, ValidateFunction>(
    tools.map((t) => [t.name, ajv.compile(t.inputSchema)]),
  );
  const shell: ShellState = { sessionId: undefined };
  const closing = new AbortController();
  const server = new Server(MCP_SERVER_INFO, {
    capabilities: { tools: {}, resources: {} },
    instructions: instructions(sandbox),
  });
  const log = (err: unknown): void => options.logger?.error({ err }, 'MCP tool failed');

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: tools.map((t) => ({
      name: t.name,
      title: t.title,
      description: t.description,
      inputSchema: t.inputSchema as unknown as { type: 'object'; [key: string]: unknown },
      annotations: { title: t.title, ...t.annotations },
    })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name } = request.params;
    const args = request.params.arguments ?? {};
    const tool = tools.find((t) => t.name === name);
    if (tool === undefined) {
      const hint = ALL_TOOLS.some((t) => t.name === name && t.needsCommit === true)
        ? ' (it is offered only when the server runs with --allow-commit)'
        : '';
      return failure(
        'AF_NOT_FOUND',
        `no tool named ${JSON.stringify(name)}${hint}; the tools are: ${tools.map((t) => t.name).join(', ')}`,
      );
    }
    const validate = validators.get(tool.name) as ValidateFunction;
    if (!validate(args)) return failure('AF_INVALID_ARGUMENT', describe(tool, validate.errors?.[0]));
    try {
      return await tool.handler(args, {
        sandbox,
        shell,
        signal: AbortSignal.any([extra.signal, closing.signal]),
      });
    } catch (err) {
      return errorResult(err, log);
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: [
      {
        uri: CHANGES_RESOURCE_URI,
        name: 'changes',
        title: "The sandbox's changes",
        description:
          'What the sandbox changed against the real codebase: the list of added/modified/deleted paths and a unified diff.',
        mimeType: 'text/x-diff',
      },
    ],
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    if (request.params.uri !== CHANGES_RESOURCE_URI) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `no resource ${request.params.uri}; the only resource is ${CHANGES_RESOURCE_URI}`,
      );
    }
    const report = await deltaReport(sandbox);
    return { contents: [{ uri: CHANGES_RESOURCE_URI, mimeType: 'text/x-diff', text: report.text }] };
  });

  let closed: Promise<void> | undefined;
  return {
    server,
    tools,
    close() {
      closed ??= (async () => {
        closing.abort();
        const id = shell.sessionId;
        shell.sessionId = undefined;
        if (id !== undefined) await sandbox.backend.closeSession(id).catch(() => undefined);
        await server.close();
      })();
      return closed;
    },
  };
}
