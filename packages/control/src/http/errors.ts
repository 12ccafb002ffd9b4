// Every failure an HTTP client can see, as `{ code, message }` with one status per error kind. The map
// from our closed set of error codes to statuses lives here and nowhere else (STYLE: one mapping per
// boundary); fastify's own errors (bad JSON, oversized bodies, validation) are translated here too.
import { AgentFenseError, InternalError, type ErrorCode, type WireError } from '@agentfense/protocol';

/** The status of each error kind. Closed: adding an error code without a status fails to compile. */
export const HTTP_STATUS: Readonly<Record<ErrorCode, number>> = {
  AF_INVALID_ARGUMENT: 400,
  AF_PERMISSION_DENIED: 403,
  AF_NOT_FOUND: 404,
  AF_ALREADY_EXISTS: 409,
  AF_WRONG_STATE: 409,
  AF_CONFLICT: 409,
  // 499 is nginx's "client closed request": a cancelled operation is nobody's server error.
  AF_CANCELLED: 499,
  AF_INTERNAL: 500,
  // A worker that broke the protocol or died under a request is an upstream failure.
  AF_PROTOCOL: 502,
  AF_WORKER_EXITED: 502,
  AF_UNAVAILABLE: 503,
  AF_TIMEOUT: 504,
};

/** The HTTP status for an AgentFense error. */
export function toHttpStatus(err: AgentFenseError): number {
  return HTTP_STATUS[err.code];
}

/** A response to send for an error: the status and the `{ code, message[, details] }` body. */
export interface HttpError {
  readonly status: number;
  readonly body: WireError;
}

/** Fastify's error codes that are the client's fault, with the status fastify gives them. */
const CLIENT_FAULTS: Readonly<Record<string, { status: number; message?: string }>> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400 },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400 },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413 },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415 },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400 },
  FST_ERR_CTP_INVALID_TYPE: { status: 400 },
  FST_ERR_VALIDATION: { status: 400 },
  FST_ERR_BAD_URL: { status: 400 },
  FST_ERR_ASYNC_CONSTRAINT: { status: 400 },
};

/**
 * Translates anything a handler or fastify threw into a response. AgentFense errors keep their code and
 * details; fastify's client errors become AF_INVALID_ARGUMENT with fastify's status (400, 413, 415); a
 * JSON syntax error is a 400; anything else is a 500 AF_INTERNAL whose message names no internals.
 */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof AgentFenseError) return { status: toHttpStatus(err), body: err.toWire() };
  const fastifyCode = (err as { code?: unknown } | null)?.code;
  if (typeof fastifyCode === 'string' && fastifyCode in CLIENT_FAULTS) {
    const fault = CLIENT_FAULTS[fastifyCode] as { status: number };
    return {
      status: fault.status,
      body: { code: 'AF_INVALID_ARGUMENT', message: clientMessage(err, fastifyCode) },
    };
  }
  if (err instanceof SyntaxError) {
    return {
      status: 400,
      body: { code: 'AF_INVALID_ARGUMENT', message: `malformed JSON body: ${err.message}` },
    };
  }
  // Any other error with a 4xx status set by fastify or a plugin is still the client's fault.
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return {
      status,
      body: { code: 'AF_INVALID_ARGUMENT', message: err instanceof Error ? err.message : String(err) },
    };
  }
  return { status: 500, body: new InternalError('internal error (see the server log)').toWire() };
}

function clientMessage(err: unknown, code: string): string {
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return `request body too large: ${message}`;
  if (code === 'FST_ERR_CTP_INVALID_JSON_BODY') return `malformed JSON body: ${message}`;
  if (code === 'FST_ERR_VALIDATION') return `invalid request: ${message}`;
  return message;
}

/** `{ code, message }` for a route nobody registered. */
export function unknownRouteError(method: string, url: string): HttpError {
  const path = url.split('?', 1)[0] ?? url;
  return {
    status: 404,
    body: {
      code: 'AF_NOT_FOUND',
      message: `no route ${method} ${path.slice(0, 200)} (see GET /v1/openapi.json)`,
    },
  };
}
