// MCP over streamable HTTP (`/mcp` on `agentfense serve`): one sandbox per MCP session, over the codebase
// the client names when it initializes (`/mcp?codebase_id=cb_…`), destroyed when the session ends: DELETE
// by the client, idle for MCP_SESSION_IDLE_MS, or the server shutting down. Or a session on a sandbox made
// through the API (`/mcp?sandbox_id=sb_…`), so everything the create request takes (network policy,
// secrets, rules, limits) reaches MCP without a query string of its own; that sandbox is its creator's and
// outlives the session. Loaded on first use only.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { AgentFenseError, InvalidArgumentError } from '@agentfense/protocol';
import type { HttpBackend } from '../http/backend.js';
import { toHttpError } from '../http/errors.js';
import { createSandboxMcpServer } from './server.js';
import type { SandboxMcpServer } from './server.js';

/** A session without a request for this long is closed and its sandbox destroyed. */
export const MCP_SESSION_IDLE_MS = 30 * 60_000;

/** What a client may give on the initialize request's query string. */
export interface McpSessionQuery {
  readonly codebase_id?: string;
  readonly sandbox_id?: string;
  readonly preset?: string;
  readonly runtime?: string;
  readonly allow_commit?: boolean;
}

interface Entry {
  readonly transport: StreamableHTTPServerTransport;
  readonly mcp: SandboxMcpServer;
  readonly sandboxId: string;
  /** Made for this session (destroyed with it), not a sandbox named by `sandbox_id`. */
  readonly owned: boolean;
  timer: NodeJS.Timeout | undefined;
  closed: Promise<void> | undefined;
}

/** A JSON-RPC error response outside any session (the transport answers within one). */
function reject(res: ServerResponse, status: number, message: string, code = -32000): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

export class McpHttpSessions {
  readonly #backend: HttpBackend;
  readonly #logger: Logger | undefined;
  readonly #idleMs: number;
  readonly #sessions = new Map<string, Entry>();
  #closing = false;

  constructor(options: { backend: HttpBackend; logger?: Logger; idleMs?: number }) {
    this.#backend = options.backend;
    this.#logger = options.logger;
    this.#idleMs = options.idleMs ?? MCP_SESSION_IDLE_MS;
  }

  /** Number of open sessions. */
  get size(): number {
    return this.#sessions.size;
  }

  /** Serves one request to /mcp (any method). */
  async handle(
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    query: McpSessionQuery,
  ): Promise<void> {
    const header = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(header) ? header[0] : header;
    if (sessionId !== undefined) {
      const entry = this.#sessions.get(sessionId);
      if (entry === undefined) {
        reject(res, 404, 'unknown or closed MCP session: initialize a new one', -32001);
        return;
      }
      if (req.method === 'DELETE') {
        // Answer once the sandbox is gone, so a client that lists sandboxes next sees it gone.
        await this.#close(entry);
        res.writeHead(200).end();
        return;
      }
      this.#touch(sessionId, entry);
      await entry.transport.handleRequest(req, res, body);
      return;
    }
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      reject(
        res,
        400,
        'no Mcp-Session-Id header: start with an initialize request (POST /mcp?codebase_id=cb_…)',
      );
      return;
    }
    if (this.#closing) {
      reject(res, 503, 'the server is shutting down');
      return;
    }
    let entry: Entry;
    try {
      entry = await this.#open(query);
    } catch (err) {
      const { status } = toHttpError(err);
      if (!(err instanceof AgentFenseError)) this.#logger?.error({ err }, 'MCP session start failed');
      // The project's own code (AF_…), as in tool errors, whatever shape the REST errors take.
      const text =
        err instanceof AgentFenseError ? `${err.code}: ${err.message}` : 'AF_INTERNAL: internal error';
      reject(res, status, text);
      return;
    }
    await entry.transport.handleRequest(req, res, body);
    // An initialize the transport refused (bad protocol version, missing Accept) opened no session.
    if (entry.transport.sessionId === undefined) await this.#close(entry);
  }

  /** Closes every session and destroys their sandboxes; new sessions are refused from now on. */
  async closeAll(): Promise<void> {
    this.#closing = true;
    await Promise.all([...this.#sessions.values()].map((entry) => this.#close(entry)));
  }

  async #open(query: McpSessionQuery): Promise<Entry> {
    const sandbox = query.sandbox_id === undefined ? await this.#create(query) : await this.#attach(query);
    const owned = query.sandbox_id === undefined;
    const mcp = createSandboxMcpServer(
      { backend: this.#backend, sandboxId: sandbox.id, allowCommit: query.allow_commit === true },
      this.#logger === undefined ? {} : { logger: this.#logger.child({ sandboxId: sandbox.id }) },
    );
    const entry: Entry = {
      transport: new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          this.#sessions.set(id, entry);
          this.#touch(id, entry);
          this.#logger?.info({ sessionId: id, sandboxId: sandbox.id }, 'MCP session opened');
        },
      }),
      mcp,
      sandboxId: sandbox.id,
      owned,
      timer: undefined,
      closed: undefined,
    };
    entry.transport.onclose = () => void this.#close(entry);
    await mcp.server.connect(entry.transport);
    return entry;
  }

  /** A sandbox of the session's own over `codebase_id`, started. */
  async #create(query: McpSessionQuery): Promise<{ id: string }> {
    const codebaseId = query.codebase_id;
    if (codebaseId === undefined || codebaseId === '') {
      throw new InvalidArgumentError(
        'name the codebase to work on: /mcp?codebase_id=cb_… (create or link one with POST /v1/codebases); optional: preset, runtime, allow_commit=true; or name a sandbox made with POST /v1/sandboxes: /mcp?sandbox_id=sb_…',
      );
    }
    const sandbox = await this.#backend.createSandbox({
      codebaseId,
      labels: { 'agentfense.client': 'mcp-http' },
      ...(query.preset === undefined ? {} : { preset: query.preset }),
      ...(query.runtime === undefined ? {} : { runtime: query.runtime }),
    });
    try {
      await this.#backend.startSandbox(sandbox.id);
    } catch (err) {
      await this.#backend.destroySandbox(sandbox.id).catch(() => undefined);
      throw err;
    }
    return sandbox;
  }

  /** An existing sandbox named by `sandbox_id`, started if it is not running. */
  async #attach(query: McpSessionQuery): Promise<{ id: string }> {
    const extra = (['codebase_id', 'preset', 'runtime'] as const).filter((k) => query[k] !== undefined);
    if (extra.length > 0) {
      throw new InvalidArgumentError(
        `sandbox_id names a sandbox that already has its codebase, rules and runtime: drop ${extra.join(', ')} from the query, or drop sandbox_id to have a sandbox made for the session`,
      );
    }
    const sandbox = await this.#backend.getSandbox(query.sandbox_id ?? '');
    if (sandbox.state !== 'RUNNING') await this.#backend.startSandbox(sandbox.id);
    return sandbox;
  }

  #touch(id: string, entry: Entry): void {
    clearTimeout(entry.timer);
    entry.timer = setTimeout(() => {
      this.#logger?.info({ sessionId: id }, 'MCP session idle: closing it');
      void this.#close(entry);
    }, this.#idleMs);
    entry.timer.unref();
  }

  #close(entry: Entry): Promise<void> {
    entry.closed ??= (async () => {
      clearTimeout(entry.timer);
      const id = entry.transport.sessionId;
      if (id !== undefined) this.#sessions.delete(id);
      await entry.mcp.close().catch(() => undefined);
      await entry.transport.close().catch(() => undefined);
      if (entry.owned) {
        await this.#backend
          .destroySandbox(entry.sandboxId)
          .catch((err: unknown) =>
            this.#logger?.error({ err, sandboxId: entry.sandboxId }, 'MCP sandbox destroy failed'),
          );
      }
      this.#logger?.info({ sessionId: id, sandboxId: entry.sandboxId }, 'MCP session closed');
    })();
    return entry.closed;
  }
}
