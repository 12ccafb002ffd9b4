// Every failure a gRPC client can see, as a status code and a message. The map from our closed set of
// error codes to gRPC status codes lives here and nowhere else (STYLE: one mapping per boundary). The
// original's Python SDK reads only the code: NOT_FOUND, DEADLINE_EXCEEDED, INVALID_ARGUMENT,
// FAILED_PRECONDITION and PERMISSION_DENIED each become a distinct exception there.
import { Metadata, status as Status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { AgentFenseError, type ErrorCode } from '@agentfense/protocol';

/** The gRPC status of each error kind. Closed: adding an error code without a status fails to compile. */
export const GRPC_STATUS: Readonly<Record<ErrorCode, Status>> = {
  AF_INVALID_ARGUMENT: Status.INVALID_ARGUMENT,
  AF_NOT_FOUND: Status.NOT_FOUND,
  AF_ALREADY_EXISTS: Status.ALREADY_EXISTS,
  // Start of a running sandbox, exec in a stopped one, a closed session: the original's answers.
  AF_WRONG_STATE: Status.FAILED_PRECONDITION,
  // A commit that lost a race with the host: gRPC's code for "retry at a higher level".
  AF_CONFLICT: Status.ABORTED,
  AF_PERMISSION_DENIED: Status.PERMISSION_DENIED,
  AF_TIMEOUT: Status.DEADLINE_EXCEEDED,
  AF_CANCELLED: Status.CANCELLED,
  AF_UNAVAILABLE: Status.UNAVAILABLE,
  // A worker that broke the protocol is our bug; one that died is restarted, so a retry may work.
  AF_PROTOCOL: Status.INTERNAL,
  AF_WORKER_EXITED: Status.UNAVAILABLE,
  AF_INTERNAL: Status.INTERNAL,
};

/** Trailing metadata key that carries our own error code (`AF_NOT_FOUND`) next to the gRPC status. */
export const ERROR_CODE_KEY = 'x-agentfense-code';

/** A status error to hand to grpc-js, with our error code in the trailers. */
export function grpcError(code: Status, message: string, afCode?: ErrorCode): ServiceError {
  const metadata = new Metadata();
  if (afCode !== undefined) metadata.set(ERROR_CODE_KEY, afCode);
  return Object.assign(new Error(message), { code, details: message, metadata });
}

/**
 * Translates anything a handler threw into a status error. AgentFense errors keep their message and get
 * their table status; anything else is INTERNAL with a message that names no internals (the caller logs it).
 */
export function toGrpcError(err: unknown): ServiceError {
  if (err instanceof AgentFenseError) return grpcError(GRPC_STATUS[err.code], err.message, err.code);
  return grpcError(Status.INTERNAL, 'internal error (see the server log)', 'AF_INTERNAL');
}
