// Every failure a gRPC client can see, as a status code and a message. The code comes from the one
// mapping both faces share (api/status.ts: error kind → gRPC code); this file only shapes it for
// grpc-js and adds our own error code to the trailers. The original's Python SDK reads only the code:
// NOT_FOUND, DEADLINE_EXCEEDED, INVALID_ARGUMENT, FAILED_PRECONDITION and PERMISSION_DENIED each become a
// distinct exception there.
import { Metadata } from '@grpc/grpc-js';
import type { ServiceError, status as Status } from '@grpc/grpc-js';
import type { ErrorCode } from '@agentfense/protocol';
import { statusOf } from '../api/status.js';

/** Trailing metadata key that carries our own error code (`AF_NOT_FOUND`) next to the gRPC status. */
export const ERROR_CODE_KEY = 'x-agentfense-code';

/** A status error to hand to grpc-js, with our error code in the trailers. */
export function grpcError(code: Status, message: string, afCode?: ErrorCode): ServiceError {
  const metadata = new Metadata();
  if (afCode !== undefined) metadata.set(ERROR_CODE_KEY, afCode);
  return Object.assign(new Error(message), { code, details: message, metadata });
}

/**
 * Translates anything a handler threw into a status error: AgentFense errors keep their message and get
 * their code from the shared table; anything else is INTERNAL with a message that names no internals
 * (the caller logs the original).
 */
export function toGrpcError(err: unknown): ServiceError {
  const status = statusOf(err);
  // GrpcCode and grpc-js's status enum are both google.rpc.Code: the same numbers.
  return grpcError(status.grpcCode, status.message, status.errorCode);
}
