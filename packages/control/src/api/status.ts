// The one mapping of failures to API statuses, shared by both faces of `agentfense serve`: our closed set
// of error kinds → gRPC status codes (what the original's SDK reads), and gRPC codes → HTTP statuses
// exactly as grpc-gateway's runtime.HTTPStatusFromCode does (what the original's REST clients read).
// The gRPC server sends `grpcCode`; the HTTP server sends `httpStatus` with a gateway-shaped body.
import { AgentFenseError, type ErrorCode } from '@agentfense/protocol';

/** gRPC status codes (google.rpc.Code), by name. */
export const GrpcCode = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type GrpcCode = (typeof GrpcCode)[keyof typeof GrpcCode];

/**
 * The gRPC code of each error kind. Closed: a new error kind without a code fails to compile.
 * Wrong state is FAILED_PRECONDITION and a command timeout DEADLINE_EXCEEDED, as the original answers.
 */
export const GRPC_CODE_OF_ERROR: Readonly<Record<ErrorCode, GrpcCode>> = {
  AF_INVALID_ARGUMENT: GrpcCode.INVALID_ARGUMENT,
  AF_NOT_FOUND: GrpcCode.NOT_FOUND,
  AF_ALREADY_EXISTS: GrpcCode.ALREADY_EXISTS,
  AF_WRONG_STATE: GrpcCode.FAILED_PRECONDITION,
  // Concurrent changes colliding (a codebase in use, commit conflicts) is gRPC's "retry at a higher level".
  AF_CONFLICT: GrpcCode.ABORTED,
  AF_PERMISSION_DENIED: GrpcCode.PERMISSION_DENIED,
  // A full filesystem or quota: gRPC's "some resource has been exhausted, perhaps a per-user quota, or
  // perhaps the entire file system is out of space".
  AF_NO_SPACE: GrpcCode.RESOURCE_EXHAUSTED,
  AF_TIMEOUT: GrpcCode.DEADLINE_EXCEEDED,
  AF_CANCELLED: GrpcCode.CANCELLED,
  AF_UNAVAILABLE: GrpcCode.UNAVAILABLE,
  // A worker that broke the protocol is a bug; one that died under a request may be retried.
  AF_PROTOCOL: GrpcCode.INTERNAL,
  AF_WORKER_EXITED: GrpcCode.UNAVAILABLE,
  AF_INTERNAL: GrpcCode.INTERNAL,
};

/** grpc-gateway's runtime.HTTPStatusFromCode, code for code. */
const HTTP_STATUS_OF_GRPC: Readonly<Record<GrpcCode, number>> = {
  [GrpcCode.OK]: 200,
  [GrpcCode.CANCELLED]: 499,
  [GrpcCode.UNKNOWN]: 500,
  [GrpcCode.INVALID_ARGUMENT]: 400,
  [GrpcCode.DEADLINE_EXCEEDED]: 504,
  [GrpcCode.NOT_FOUND]: 404,
  [GrpcCode.ALREADY_EXISTS]: 409,
  [GrpcCode.PERMISSION_DENIED]: 403,
  [GrpcCode.RESOURCE_EXHAUSTED]: 429,
  [GrpcCode.FAILED_PRECONDITION]: 400,
  [GrpcCode.ABORTED]: 409,
  [GrpcCode.OUT_OF_RANGE]: 400,
  [GrpcCode.UNIMPLEMENTED]: 501,
  [GrpcCode.INTERNAL]: 500,
  [GrpcCode.UNAVAILABLE]: 503,
  [GrpcCode.DATA_LOSS]: 500,
  [GrpcCode.UNAUTHENTICATED]: 401,
};

/**
 * Error kinds whose HTTP status is more precise than the gateway's for their gRPC code: no room to
 * write is 507 Insufficient Storage (the gateway would say 429 Too Many Requests, which invites a
 * retry that cannot succeed until room is freed).
 */
const HTTP_STATUS_OF_ERROR: Readonly<Partial<Record<ErrorCode, number>>> = {
  AF_NO_SPACE: 507,
};

/** The HTTP status grpc-gateway answers for a gRPC code (500 for a code outside the table, as it does). */
export function httpStatusFromGrpcCode(code: number): number {
  return HTTP_STATUS_OF_GRPC[code as GrpcCode] ?? 500;
}

/** A failure as either face reports it. */
export interface ApiStatus {
  /** Our stable error kind (also sent in the error details as google.rpc.ErrorInfo.reason). */
  readonly errorCode: ErrorCode;
  readonly grpcCode: GrpcCode;
  readonly httpStatus: number;
  /** Safe to show: internal failures say only "internal error (see the server log)". */
  readonly message: string;
  readonly details?: Record<string, unknown>;
}

/** The status of an AgentFense error. */
export function statusOfError(err: AgentFenseError): ApiStatus {
  const grpcCode = GRPC_CODE_OF_ERROR[err.code];
  return {
    errorCode: err.code,
    grpcCode,
    httpStatus: HTTP_STATUS_OF_ERROR[err.code] ?? httpStatusFromGrpcCode(grpcCode),
    message: err.code === 'AF_INTERNAL' ? INTERNAL_MESSAGE : err.message,
    ...(err.details === undefined ? {} : { details: err.details }),
  };
}

const INTERNAL_MESSAGE = 'internal error (see the server log)';

/**
 * The status of anything thrown: AgentFense errors keep their kind, anything else is INTERNAL with a
 * message that names no internals (the caller logs the original).
 */
export function statusOf(err: unknown): ApiStatus {
  if (err instanceof AgentFenseError) return statusOfError(err);
  return {
    errorCode: 'AF_INTERNAL',
    grpcCode: GrpcCode.INTERNAL,
    httpStatus: 500,
    message: INTERNAL_MESSAGE,
  };
}
