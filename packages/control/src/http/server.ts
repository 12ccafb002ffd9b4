// The HTTP server (contract §7): fastify with our validators, error mapping, bearer auth and the
// routes, over an HttpBackend. `createHttpServer` builds it; `listen`/`close` run and stop it. Closing stops
// accepting, aborts running commands, then closes the backend (sessions, sandboxes, workers, mounts).
import type { AddressInfo } from 'node:net';
import { Ajv } from 'ajv';
import { LogController, fastify } from 'fastify';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { DEFAULT_MAX_UPLOAD_BYTES } from '../codebases/service.js';
import { GrpcCode } from '../api/status.js';
import { StreamBudget } from '../api/stream-budget.js';
import type { BlobReader } from '@agentfense/blobs';
import { BearerAuth, assertListenAllowed, authOf, refuseNonLoopback } from './auth.js';
import type { ListenAddress } from './auth.js';
import type { HttpBackend } from './backend.js';
import { defineRoute } from './define.js';
import type { RouteConfig } from './define.js';
import { errorReply, toHttpError, unknownRouteError } from './errors.js';
import { buildOpenApi } from './openapi.js';
import type { RegisteredRoute } from './openapi.js';
import { registerMcpRoute } from '../mcp/http-route.js';
import { registerBlobRoutes } from './routes/blobs.js';
import { registerCodebaseRoutes } from './routes/codebases.js';
import { registerSandboxRoutes } from './routes/sandboxes.js';
import { registerSessionRoutes } from './routes/sessions.js';
import { Health } from './schemas.js';
import type { Schema } from './schemas.js';
import { PROTO_KEYWORDS, normalizeInput, toJsonOutput } from './protojson.js';

/** The API's version as the OpenAPI document and /v1/health report it. */
export const API_VERSION = '0.1.0';
/**
 * Largest JSON request body. Rules, labels and a command with its stdin are small; 16 MiB leaves room
 * for large stdin while keeping one request from pinning much memory. Files go through PUT, unlimited here.
 */
export const DEFAULT_BODY_LIMIT = 16 * 1024 * 1024;
/** While closing, how often connections that became idle are dropped. */
const CLOSE_SWEEP_MS = 50;
/** Longest URL parameter: a file path may be PATH_MAX (4096 bytes), percent-encoded up to three times longer. */
const MAX_PARAM_LENGTH = 3 * 4096 + 64;

export interface HttpServerOptions {
  readonly backend: HttpBackend;
  /** Require `Authorization: Bearer <token>` on every route but health and the OpenAPI document. */
  readonly token?: string;
  /**
   * Serve without a token (loopback only, loopback Host/Origin only): every local user can then use the
   * API. Required when `token` is absent, so that no server is open by omission.
   */
  readonly insecureNoAuth?: boolean;
  readonly logger?: Logger;
  readonly bodyLimit?: number;
  /** Largest uploaded file (bytes); default the control plane's, 1 GiB. Give the plane the same value. */
  readonly maxUploadBytes?: number;
  /** Back-pressure of its streams; `serve` shares one with its gRPC face. Default: its own. */
  readonly streams?: StreamBudget;
  /**
   * Serve `GET /v1/blobs/<digest>` from `store` to node agents presenting `readerToken` (the node
   * agents' token; the API token does not read blobs). Absent: no blob route.
   */
  readonly blobs?: { readonly store: BlobReader; readonly readerToken: string };
}

/** A built server: the fastify instance, the routes it registered, and its lifecycle. */
export interface HttpServer {
  readonly app: FastifyInstance;
  /** Every route, as fastify's onRoute hook reported it (the OpenAPI document is built from these). */
  readonly routes: readonly RegisteredRoute[];
  /** The OpenAPI 3.1 document served at GET /v1/openapi.json. */
  openApi(): Record<string, unknown>;
  /** Listens (refusing a non-loopback address without a token); resolves with the bound address. */
  listen(address: ListenAddress): Promise<ListenAddress>;
  /** Stops accepting, aborts running commands, waits for responses, then closes the backend. Idempotent. */
  close(): Promise<void>;
}

/** Body validation is strict (no coercion: `"1"` is not a number); query strings are coerced. */
function validators(): { body: Ajv; other: Ajv } {
  const common = { allErrors: false, removeAdditional: false, allowUnionTypes: true, strict: true } as const;
  const body = new Ajv({ ...common, coerceTypes: false, useDefaults: false });
  const other = new Ajv({ ...common, coerceTypes: 'array', useDefaults: true });
  for (const keyword of PROTO_KEYWORDS) {
    body.addKeyword(keyword);
    other.addKeyword(keyword);
  }
  return { body, other };
}

export function createHttpServer(options: HttpServerOptions): HttpServer {
  const { backend } = options;
  const auth = authOf(options);
  // Widened to FastifyBaseLogger so the instance has the default type that routes are written against.
  const logger: FastifyBaseLogger | undefined = options.logger;
  const app = fastify({
    ...(logger === undefined ? { logger: false } : { loggerInstance: logger }),
    // No line per request (a busy client would drown the log); failures are logged by the error handler.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    exposeHeadRoutes: false,
    // Requests arriving while closing get our own 503 `{code, message}` (the hook below), not fastify's.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
  });
  const routes: RegisteredRoute[] = [];
  const shutdown = new AbortController();

  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      routes.push({
        method,
        url: route.url,
        schema: route.schema as Record<string, unknown> | undefined,
        config: route.config,
      });
    }
  });

  const ajv = validators();
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? ajv.body : ajv.other).compile(schema),
  );
  // Answers in the gateway's JSON (camelCase names, int64 as strings), driven by the response schema;
  // the schemas never filter what is sent (tests check responses against the served document).
  app.setSerializerCompiler(
    ({ schema }) =>
      (data) =>
        JSON.stringify(toJsonOutput(data, schema as Schema)),
  );

  // JSON bodies whatever the Content-Type says, or without one, as the gateway reads them (the
  // original's README curls send none, or curl's form type). An empty body is "no body" (POST …/start).
  // Raw uploads have their own parser in their scope.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  const jsonParser = (
    request: FastifyRequest,
    body: string | Buffer,
    done: (err: Error | null, body?: unknown) => void,
  ): void => {
    const text = body as string; // parseAs: 'string'
    if (text === '') {
      done(null, undefined);
      return;
    }
    void parseJson(request, text, done);
  };
  app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonParser);
  app.addContentTypeParser('*', { parseAs: 'string' }, jsonParser);

  // Requests in the gateway's JSON (either field name, enums by number, int64 strings, unknown fields
  // ignored) become what the validators and handlers expect, before validation.
  app.addHook('preValidation', (request, _reply, done) => {
    const schema = request.routeOptions.schema as { body?: Schema; querystring?: Schema } | undefined;
    if (schema?.body !== undefined && request.body !== undefined && request.body !== null) {
      request.body = normalizeInput(request.body, schema.body);
    }
    if (schema?.querystring !== undefined) {
      request.query = normalizeInput(request.query, schema.querystring);
    }
    done();
  });

  app.setErrorHandler((err, request, reply) => {
    const { status, body } = toHttpError(err);
    if (status >= 500) request.log.error({ err, url: request.url, method: request.method }, 'request failed');
    return reply.status(status).send(body);
  });
  app.setNotFoundHandler((request, reply) => {
    const { status, body } = unknownRouteError(request.method, request.url);
    return reply.status(status).send(body);
  });

  app.addHook('onRequest', (_request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    if (!shutdown.signal.aborted) {
      done();
      return;
    }
    void reply
      .status(503)
      .header('connection', 'close')
      .send(errorReply('AF_UNAVAILABLE', GrpcCode.UNAVAILABLE, 'the server is shutting down'));
  });

  if (auth === undefined) {
    // Without a token, loopback is the only protection: refuse requests addressed to other names.
    app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
      const refused = refuseNonLoopback(request.headers);
      if (refused === undefined) {
        done();
        return;
      }
      void reply.status(403).send(errorReply('AF_PERMISSION_DENIED', GrpcCode.PERMISSION_DENIED, refused));
    });
  }

  if (auth !== undefined) {
    app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
      const config = request.routeOptions.config as Partial<RouteConfig> | undefined;
      if (config?.doc?.auth === false || auth.check(request.headers.authorization)) {
        done();
        return;
      }
      void reply
        .status(401)
        .header('www-authenticate', 'Bearer realm="agentfense"')
        .send(
          errorReply('AF_PERMISSION_DENIED', GrpcCode.UNAUTHENTICATED, 'missing or invalid bearer token'),
        );
    });
  }

  // Commands in flight end now rather than holding the shutdown for their full duration. Closing only
  // drops the connections idle at that moment; a keep-alive connection whose response finishes later
  // would hold the close for the whole keep-alive timeout (72 s), so idle ones are dropped until closed.
  let sweeper: NodeJS.Timeout | undefined;
  app.addHook('preClose', (done) => {
    shutdown.abort();
    sweeper = setInterval(() => app.server.closeIdleConnections(), CLOSE_SWEEP_MS);
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    clearInterval(sweeper);
    done();
  });

  let document: Record<string, unknown> | undefined;
  const openApi = (): Record<string, unknown> =>
    (document ??= buildOpenApi(routes, { version: API_VERSION, auth: auth !== undefined }));

  defineRoute(app, {
    method: 'GET',
    url: '/v1/health',
    operationId: 'Health',
    summary: 'Liveness (no authentication)',
    tags: ['meta'],
    response: Health,
    doc: { auth: false },
    handler: () => Promise.resolve({ status: 'ok', version: API_VERSION }),
  });
  defineRoute(app, {
    method: 'GET',
    url: '/v1/openapi.json',
    operationId: 'OpenApi',
    summary: 'This OpenAPI 3.1 document (no authentication)',
    tags: ['meta'],
    response: { type: 'object' },
    doc: { auth: false },
    handler: () => Promise.resolve(openApi()),
  });
  const streams = options.streams ?? new StreamBudget();
  registerCodebaseRoutes(app, backend, {
    maxUploadBytes: options.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES,
    streams,
    shutdown: shutdown.signal,
  });
  registerSandboxRoutes(app, backend, { shutdown: shutdown.signal, streams });
  registerSessionRoutes(app, backend);
  if (options.blobs !== undefined) {
    registerBlobRoutes(app, {
      store: options.blobs.store,
      readers: new BearerAuth(options.blobs.readerToken),
      api: auth,
      shutdown: shutdown.signal,
    });
  }
  registerMcpRoute(app, backend, options.logger === undefined ? {} : { logger: options.logger });

  let closing: Promise<void> | undefined;
  return {
    app,
    routes,
    openApi,
    async listen(address) {
      assertListenAllowed(address, auth !== undefined);
      await app.listen({ host: address.host, port: address.port });
      const bound = app.server.address() as AddressInfo;
      return { host: bound.address, port: bound.port };
    },
    close() {
      closing ??= (async () => {
        try {
          await app.close();
        } finally {
          await backend.close();
        }
      })();
      return closing;
    },
  };
}
