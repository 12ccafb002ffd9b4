// The OpenAPI 3.1 document, built from the routes fastify registered (collected by an onRoute hook), so
// it cannot drift from what the server serves. OpenAPI 3.1 schemas are JSON Schema: ours go in unchanged.
import type { RouteConfig } from './define.js';
import { documented } from './protojson.js';
import type { Schema } from './schemas.js';

/** A route as the onRoute hook saw it. */
export interface RegisteredRoute {
  readonly method: string;
  readonly url: string;
  readonly schema: Readonly<Record<string, unknown>> | undefined;
  readonly config: Partial<RouteConfig> | undefined;
}

/** `/v1/codebases/:id/files/*` → `/v1/codebases/{id}/files/{path}`. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}').replace(/\*$/, '{path}');
}

/** The name a fastify parameter has in the document (`*` is `path`). */
function paramName(name: string): string {
  return name === '*' ? 'path' : name;
}

interface ObjectSchema {
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly required?: readonly string[];
}

function parameters(where: 'path' | 'query', schema: unknown): Record<string, unknown>[] {
  const object = (schema ?? {}) as ObjectSchema;
  return Object.entries(object.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property as { description?: string };
    const isArray = (rest as { type?: unknown }).type === 'array';
    return {
      name: paramName(name),
      in: where,
      required: where === 'path' || (object.required ?? []).includes(name),
      ...(description === undefined ? {} : { description }),
      schema: rest,
      ...(isArray ? { style: 'form', explode: true } : {}),
    };
  });
}

const SECURITY_SCHEME = 'bearer';

/** Builds the document. `auth` says whether the server was started with a token. */
export function buildOpenApi(
  routes: readonly RegisteredRoute[],
  info: { version: string; auth: boolean },
): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of [...routes].sort((a, b) => a.url.localeCompare(b.url))) {
    const schema = route.schema ?? {};
    const doc = route.config?.doc ?? {};
    const responses: Record<string, unknown> = {};
    for (const [status, body] of Object.entries((schema.response ?? {}) as Record<string, Schema>)) {
      const isError = status === 'default';
      const contentType =
        !isError && doc.responseContentType !== undefined ? doc.responseContentType : 'application/json';
      const content =
        contentType === 'application/octet-stream'
          ? { schema: { type: 'string', contentMediaType: 'application/octet-stream' } }
          : { schema: documented(body, 'output') };
      responses[status] = {
        description: isError
          ? 'Error: google.rpc.Status `{ code, message, details }` (code: the gRPC code), with the HTTP status grpc-gateway gives that code'
          : 'Success',
        content: { [contentType]: content },
      };
    }
    const requestBody =
      schema.body !== undefined
        ? {
            required: true,
            content: { 'application/json': { schema: documented(schema.body as Schema, 'input') } },
          }
        : doc.requestContentType !== undefined
          ? {
              required: true,
              content: {
                [doc.requestContentType]: {
                  schema: { type: 'string', contentMediaType: doc.requestContentType },
                },
              },
            }
          : undefined;
    const operation = {
      operationId: schema.operationId,
      summary: schema.summary,
      ...(schema.description === undefined ? {} : { description: schema.description }),
      tags: schema.tags,
      parameters: [
        ...parameters('path', schema.params),
        ...parameters(
          'query',
          schema.querystring === undefined ? undefined : documented(schema.querystring as Schema, 'input'),
        ),
      ],
      ...(requestBody === undefined ? {} : { requestBody }),
      responses,
      ...(doc.auth === false ? { security: [] } : {}),
    };
    const path = openApiPath(route.url);
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'AgentFense',
      version: info.version,
      description:
        "Codebases, sandboxes and sessions in grpc-gateway's JSON mapping (protojson), compatible with the original AgentFense REST gateway: answers use lowerCamelCase names with every field present and int64 values as strings; requests may use lowerCamelCase or the proto (snake_case) names, enums by name or number, and unknown fields are ignored; a JSON body needs no Content-Type. Errors are google.rpc.Status `{ code, message, details }`. See packages/control/src/http/README.md.",
    },
    paths,
    components: {
      securitySchemes: {
        [SECURITY_SCHEME]: {
          type: 'http',
          scheme: 'bearer',
          description: info.auth
            ? 'This server requires `Authorization: Bearer <token>` (the content of its --token-file).'
            : 'This server was started without a token: no authentication (loopback only).',
        },
      },
    },
    ...(info.auth ? { security: [{ [SECURITY_SCHEME]: [] }] } : {}),
  };
}
