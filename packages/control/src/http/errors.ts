// Every failure an HTTP client can see, as grpc-gateway writes it: google.rpc.Status JSON
// `{ code, message, details }` where `code` is the gRPC status code, with the HTTP status the gateway
// gives that code. The mapping itself lives in ../api/status.ts (shared with the gRPC face); this file
// adds the body, and translates fastify's own errors (bad JSON, oversized bodies, validation).
import { AgentFenseError } from '@agentfense/protocol';
import type { ErrorCode } from '@agentfense/protocol';
import { GrpcCode, httpStatusFromGrpcCode, statusOf } from '../api/status.js';
import type { ApiStatus } from '../api/status.js';

/** Where the ErrorInfo in every error's details says the reason comes from. */
export const ERROR_DOMAIN = 'agentfense';
const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';

/** The error body: google.rpc.Status in protojson, as the gateway sends it. */
export interface GatewayError {
  readonly code: number;
  readonly message: string;
  readonly details: readonly Record<string, unknown>[];
}

/** A response to send for an error: the HTTP status and the body. */
export interface HttpError {
  readonly status: number;
  readonly body: GatewayError;
}

/**
 * The body for a status. Our stable error code travels as a google.rpc.ErrorInfo `reason` (the standard
 * place for a machine-readable cause), its details as the ErrorInfo's string metadata.
 */
export function gatewayBody(
  grpcCode: number,
  message: string,
  errorCode: ErrorCode,
  details?: Record<string, unknown>,
): GatewayError {
  const metadata = Object.fromEntries(
    Object.entries(details ?? {}).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]),
  );
  return {
    code: grpcCode,
    message,
    details: [{ '@type': ERROR_INFO_TYPE, reason: errorCode, domain: ERROR_DOMAIN, metadata }],
  };
}

function fromStatus(s: ApiStatus): HttpError {
  return { status: s.httpStatus, body: gatewayBody(s.grpcCode, s.message, s.errorCode, s.details) };
}

/** A request-level failure: INVALID_ARGUMENT with a more precise HTTP status where one exists. */
function invalid(status: number, message: string): HttpError {
  return { status, body: gatewayBody(GrpcCode.INVALID_ARGUMENT, message, 'AF_INVALID_ARGUMENT') };
}

/** Fastify's error codes that are the client's fault, with the status to answer. */
const CLIENT_FAULTS: Readonly<Record<string, number>> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 400,
  FST_ERR_CTP_EMPTY_JSON_BODY: 400,
  // Not a gateway status (it has none for this), but the precise one: the body was refused unread.
  FST_ERR_CTP_BODY_TOO_LARGE: 413,
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 415,
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 400,
  FST_ERR_CTP_INVALID_TYPE: 400,
  FST_ERR_VALIDATION: 400,
  FST_ERR_BAD_URL: 400,
  FST_ERR_ASYNC_CONSTRAINT: 400,
};

/**
 * Translates anything a handler or fastify threw into a response. AgentFense errors keep their kind;
 * fastify's client errors become INVALID_ARGUMENT; a JSON syntax error is a 400; anything else is a 500
 * INTERNAL whose message names no internals.
 */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof AgentFenseError) return fromStatus(statusOf(err));
  const fastifyCode = (err as { code?: unknown } | null)?.code;
  if (typeof fastifyCode === 'string' && fastifyCode in CLIENT_FAULTS) {
    return invalid(CLIENT_FAULTS[fastifyCode] as number, clientMessage(err, fastifyCode));
  }
  if (err instanceof SyntaxError) return invalid(400, `malformed JSON body: ${err.message}`);
  // Any other error with a 4xx status set by fastify or a plugin is still the client's fault.
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return invalid(status, err instanceof Error ? err.message : String(err));
  }
  return fromStatus(statusOf(err));
}

/** The HTTP status for an error as this face answers it (for callers that only need the number). */
export function toHttpStatus(err: unknown): number {
  return toHttpError(err).status;
}

function clientMessage(err: unknown, code: string): string {
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return `request body too large: ${message}`;
  if (code === 'FST_ERR_CTP_INVALID_JSON_BODY') return `malformed JSON body: ${message}`;
  if (code === 'FST_ERR_VALIDATION') return `invalid request: ${message}`;
  return message;
}

/** A body for a status decided here (auth, shutdown, upload limits): kind, message, details. */
export function errorReply(
  errorCode: ErrorCode,
  grpcCode: number,
  message: string,
  details?: Record<string, unknown>,
): GatewayError {
  return gatewayBody(grpcCode, message, errorCode, details);
}

/** The body for a route nobody registered (NOT_FOUND, as the gateway answers unknown paths). */
export function unknownRouteError(method: string, url: string): HttpError {
  const path = url.split('?', 1)[0] ?? url;
  return {
    status: httpStatusFromGrpcCode(GrpcCode.NOT_FOUND),
    body: gatewayBody(
      GrpcCode.NOT_FOUND,
      `no route ${method} ${path.slice(0, 200)} (see GET /v1/openapi.json)`,
      'AF_NOT_FOUND',
    ),
  };
}
