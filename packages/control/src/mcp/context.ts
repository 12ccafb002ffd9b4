// What the tools run against: one sandbox, reached through the same backend the HTTP API uses, so the
// stdio server (`agentfense mcp`) and the `/mcp` route of `agentfense serve` behave the same.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { HttpBackend } from '../http/backend.js';

/** The backend operations the MCP tools use. */
export type McpBackend = Pick<
  HttpBackend,
  | 'getSandbox'
  | 'exec'
  | 'changes'
  | 'diff'
  | 'commit'
  | 'discard'
  | 'checkpoint'
  | 'listCheckpoints'
  | 'restoreCheckpoint'
  | 'readFile'
  | 'writeFile'
  | 'createSession'
  | 'getSession'
  | 'sessionExec'
  | 'closeSession'
>;

/** The sandbox an MCP server works in, for its whole life. */
export interface McpSandboxContext {
  readonly backend: McpBackend;
  readonly sandboxId: string;
  /** Whether `commit` and `discard` are offered (otherwise the tools are absent). */
  readonly allowCommit: boolean;
}

/** What a tool handler receives besides its arguments. */
export interface ToolCall {
  readonly sandbox: McpSandboxContext;
  /** The persistent shell of this MCP server (the `shell` tool). */
  readonly shell: ShellState;
  /** Aborted when the client cancels the request (notifications/cancelled) or the server closes. */
  readonly signal: AbortSignal;
}

/** The `shell` tool's session id, if one is open. */
export interface ShellState {
  sessionId: string | undefined;
}

/** A JSON Schema for a tool's arguments (always an object). */
export interface InputSchema {
  readonly type: 'object';
  readonly properties: Readonly<Record<string, object>>;
  readonly required?: readonly string[];
  readonly additionalProperties: false;
}

/** One tool: how it is listed to the client and what it does. */
export interface ToolDefinition {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly inputSchema: InputSchema;
  readonly annotations: {
    readonly readOnlyHint: boolean;
    readonly destructiveHint?: boolean;
    readonly idempotentHint?: boolean;
    readonly openWorldHint: boolean;
  };
  /** Only offered with --allow-commit. */
  readonly needsCommit?: boolean;
  readonly handler: (args: Record<string, unknown>, call: ToolCall) => Promise<CallToolResult>;
}
