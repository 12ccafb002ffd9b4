// One way to declare a route: method, URL, documentation and schemas together, so every route the server
// has is described the same way and the OpenAPI document can be built from what fastify registered.
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema, HTTPMethods } from 'fastify';
import { ErrorBody } from './schemas.js';
import type { Schema } from './schemas.js';

/** OpenAPI details that are not JSON Schemas of JSON bodies (raw bytes, NDJSON streams, auth). */
export interface RouteDoc {
  /** Content type of a raw (non-JSON) request body, e.g. application/octet-stream. */
  readonly requestContentType?: string;
  /** Content type of a non-JSON success response, with the schema of one item for streams. */
  readonly responseContentType?: string;
  /** False for routes served without a token (health, the OpenAPI document). Default true. */
  readonly auth?: boolean;
}

/** Route config as fastify stores it (read back by the auth hook and the OpenAPI builder). */
export interface RouteConfig {
  readonly doc: RouteDoc;
}

export interface RouteSpec<Body, Query, Params> {
  readonly method: HTTPMethods;
  /** Fastify syntax: `:id` parameters, a final `*` for a path that may contain `/`. */
  readonly url: string;
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tags: readonly string[];
  readonly params?: Schema;
  readonly querystring?: Schema;
  /** JSON body schema (absent: the route takes no body, or a raw one, see doc.requestContentType). */
  readonly body?: Schema;
  /** A request without a body counts as `{}` (POST …/commit with no options). */
  readonly optionalBody?: boolean;
  /** The success response: its status (default 200) and body schema. */
  readonly status?: number;
  readonly response: Schema;
  readonly doc?: RouteDoc;
  readonly handler: (
    request: FastifyRequest<{ Body: Body; Querystring: Query; Params: Params }>,
    reply: FastifyReply,
  ) => Promise<unknown>;
}

/** Registers a documented route. Errors answer google.rpc.Status `{ code, message, details }` (the server's error handler). */
export function defineRoute<Body = unknown, Query = unknown, Params = unknown>(
  app: FastifyInstance,
  spec: RouteSpec<Body, Query, Params>,
): void {
  const config: RouteConfig = { doc: spec.doc ?? {} };
  app.route<{ Body: Body; Querystring: Query; Params: Params }>({
    method: spec.method,
    url: spec.url,
    config,
    ...(spec.optionalBody === true
      ? {
          preValidation: (request: FastifyRequest, _reply: FastifyReply, done: () => void) => {
            request.body ??= {};
            done();
          },
        }
      : {}),
    schema: {
      operationId: spec.operationId,
      summary: spec.summary,
      ...(spec.description === undefined ? {} : { description: spec.description }),
      tags: [...spec.tags],
      ...(spec.params === undefined ? {} : { params: spec.params }),
      ...(spec.querystring === undefined ? {} : { querystring: spec.querystring }),
      ...(spec.body === undefined ? {} : { body: spec.body }),
      response: { [String(spec.status ?? 200)]: spec.response, default: ErrorBody },
      // operationId, summary, description and tags are for the OpenAPI document; fastify keeps them.
    } as FastifySchema,
    handler: spec.handler,
  });
}
