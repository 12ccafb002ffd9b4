// The `/mcp` route of the HTTP server: MCP's streamable HTTP transport, behind the same bearer token as
// the rest of the API. This file stays free of the MCP SDK; the session handling (and the SDK with it) is
// imported on the first request to /mcp, so a server nobody asks for MCP never loads it.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { HttpBackend } from '../http/backend.js';
import { toHttpError } from '../http/errors.js';
import { ErrorBody } from '../http/schemas.js';
import type { McpHttpSessions, McpSessionQuery } from './http-sessions.js';
import { MCP_MAX_MESSAGE_BYTES, tooLargeMessage } from './message-limit.js';

const QUERY = {
  type: 'object',
  properties: {
    codebase_id: {
      type: 'string',
      description: "On the initialize request: the codebase the session's sandbox is created over.",
    },
    sandbox_id: {
      type: 'string',
      description:
        'On initialize, instead of codebase_id: a sandbox made with POST /v1/sandboxes (its network policy, secrets, rules and limits), started if it is not running and kept when the session ends.',
    },
    preset: { type: 'string', description: 'On initialize: the permission preset (default agent-safe).' },
    runtime: { type: 'string', description: 'On initialize: bwrap (default) or docker.' },
    allow_commit: { type: 'boolean', description: 'On initialize: offer the commit and discard tools.' },
  },
  additionalProperties: true,
} as const;

/** Bytes of a refused body read and dropped before the connection is closed instead. */
const MAX_DRAIN_BYTES = 8 * MCP_MAX_MESSAGE_BYTES;

/**
 * Calls `then` once the rest of a refused body is read and dropped: a client (fetch) still sending its
 * body when the answer comes and the connection closes sees only a failed request, not the answer. A body
 * that goes on past MAX_DRAIN_BYTES gets its connection closed.
 */
function afterBody(raw: IncomingMessage, then: () => void): void {
  if (raw.complete) {
    then();
    return;
  }
  let drained = 0;
  raw.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > MAX_DRAIN_BYTES) raw.socket.destroy();
  });
  raw.once('end', then);
  raw.resume();
}

/** Registers GET/POST/DELETE /mcp; open sessions are closed (their sandboxes destroyed) when the app closes. */
export function registerMcpRoute(
  app: FastifyInstance,
  backend: HttpBackend,
  options: { logger?: Logger } = {},
): void {
  let sessions: Promise<McpHttpSessions> | undefined;
  const load = (): Promise<McpHttpSessions> =>
    (sessions ??= import('./http-sessions.js').then(
      (m) =>
        new m.McpHttpSessions({
          backend,
          ...(options.logger === undefined ? {} : { logger: options.logger.child({ component: 'mcp' }) }),
        }),
    ));

  const operations = { POST: 'McpPost', GET: 'McpGet', DELETE: 'McpDelete' } as const;
  for (const [method, operationId] of Object.entries(operations)) {
    app.route({
      method,
      url: '/mcp',
      schema: {
        operationId,
        summary: 'The Model Context Protocol (streamable HTTP transport): one sandbox per MCP session',
        description:
          'Initialize with POST /mcp?codebase_id=cb_… (optional preset, runtime, allow_commit), or with POST /mcp?sandbox_id=sb_… to work in a sandbox made through the API; the Mcp-Session-Id response header names the session, whose own sandbox is destroyed on DELETE, after 30 idle minutes, or at shutdown (a sandbox named by sandbox_id is kept). Tools as `agentfense mcp`.',
        tags: ['mcp'],
        querystring: QUERY,
        ...(method === 'POST'
          ? { body: { description: 'A JSON-RPC message of the Model Context Protocol (initialize first)' } }
          : {}),
        response: {
          200: {
            type: 'object',
            description: 'A JSON-RPC message (or, with Accept: text/event-stream, an SSE stream of them)',
          },
          default: ErrorBody,
        },
      },
      config: { doc: {} },
      // One message at most MCP_MAX_MESSAGE_BYTES, as on stdio; a larger one gets a JSON-RPC error (below),
      // not the REST error shape, and the session it was sent on lives on.
      bodyLimit: MCP_MAX_MESSAGE_BYTES,
      errorHandler: (error, request, reply) => {
        if ((error as { code?: string }).code !== 'FST_ERR_CTP_BODY_TOO_LARGE') {
          const { status, body } = toHttpError(error);
          void reply.status(status).send(body);
          return;
        }
        request.log.info({ limit: MCP_MAX_MESSAGE_BYTES }, 'MCP request over the size limit refused');
        afterBody(request.raw, () => {
          void reply
            .status(413)
            .header('content-type', 'application/json')
            .send({ jsonrpc: '2.0', id: null, error: { code: -32600, message: tooLargeMessage() } });
        });
      },
      handler: async (request, reply) => {
        const handler = await load();
        // The SDK's transport writes the response itself (JSON or an SSE stream).
        reply.hijack();
        try {
          await handler.handle(request.raw, reply.raw, request.body, request.query as McpSessionQuery);
        } catch (err) {
          request.log.error({ err }, 'MCP request failed');
          if (!reply.raw.headersSent) {
            reply.raw.writeHead(500, { 'content-type': 'application/json' });
            reply.raw.end(
              JSON.stringify({
                jsonrpc: '2.0',
                error: { code: -32603, message: 'internal error' },
                id: null,
              }),
            );
          } else reply.raw.end();
        }
      },
    });
  }

  app.addHook('preClose', async () => {
    if (sessions !== undefined) await (await sessions).closeAll();
  });
}
