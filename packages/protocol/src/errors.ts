// The closed set of AgentFense error kinds. Every failure a user or a peer can observe is one of these;
// each has a stable `code` that crosses process boundaries (`{ code, message }` on the wire, JSON over HTTP)
// and is mapped once per boundary (HTTP status in control, errno in the worker).

/** Stable error codes. Never rename one: clients match on them. */
export const ERROR_CODES = [
  'AF_INVALID_ARGUMENT',
  'AF_NOT_FOUND',
  'AF_ALREADY_EXISTS',
  'AF_WRONG_STATE',
  'AF_CONFLICT',
  'AF_PERMISSION_DENIED',
  'AF_NO_SPACE',
  'AF_TIMEOUT',
  'AF_CANCELLED',
  'AF_UNAVAILABLE',
  'AF_PROTOCOL',
  'AF_WORKER_EXITED',
  'AF_INTERNAL',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** The shape in which an error crosses the wire or an HTTP response. */
export interface WireError {
  readonly code: ErrorCode;
  readonly message: string;
  /** Optional structured details (conflicting paths, rule index, ...). Must be plain data. */
  readonly details?: Record<string, unknown>;
}

export interface AgentFenseErrorOptions {
  readonly cause?: unknown;
  readonly details?: Record<string, unknown>;
}

/** Base class of every error AgentFense throws on purpose. */
export abstract class AgentFenseError extends Error {
  abstract readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(message: string, options: AgentFenseErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.details = options.details;
  }

  /** The wire form: code, message and plain-data details, never the stack or the cause. */
  toWire(): WireError {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

/** Bad input from a caller: invalid rules, malformed ids, path traversal, oversized uploads. */
export class InvalidArgumentError extends AgentFenseError {
  readonly code = 'AF_INVALID_ARGUMENT';
}
/** An id, path or name that does not exist (or that the caller may not know exists). */
export class NotFoundError extends AgentFenseError {
  readonly code = 'AF_NOT_FOUND';
}
/** A create that would replace something existing (a preset name, a codebase path). */
export class AlreadyExistsError extends AgentFenseError {
  readonly code = 'AF_ALREADY_EXISTS';
}
/** The operation is valid but not in the object's current state (exec on a stopped sandbox). */
export class WrongStateError extends AgentFenseError {
  readonly code = 'AF_WRONG_STATE';
}
/** Concurrent changes collide (commit conflicts, a codebase in use). */
export class ConflictError extends AgentFenseError {
  readonly code = 'AF_CONFLICT';
}
/** The permission rules or the authentication refuse the operation. */
export class PermissionDeniedError extends AgentFenseError {
  readonly code = 'AF_PERMISSION_DENIED';
}
/**
 * No room left to write: the filesystem holding the data is full (ENOSPC) or a quota is reached (EDQUOT,
 * a sandbox's own disk quota). The message names what is full and what frees it.
 */
export class NoSpaceError extends AgentFenseError {
  readonly code = 'AF_NO_SPACE';
}
/** A deadline passed (a command's timeout, a worker that did not answer). */
export class TimeoutError extends AgentFenseError {
  readonly code = 'AF_TIMEOUT';
}
/** The caller cancelled the operation. */
export class CancelledError extends AgentFenseError {
  readonly code = 'AF_CANCELLED';
}
/** Something the host must provide is missing or unusable (bwrap, /dev/fuse, a Docker engine). */
export class UnavailableError extends AgentFenseError {
  readonly code = 'AF_UNAVAILABLE';
}
/** A peer broke the wire protocol (garbage, oversized or truncated frames, bad handshake). */
export class ProtocolError extends AgentFenseError {
  readonly code = 'AF_PROTOCOL';
}
/** A worker process exited while requests were pending or before it became ready. */
export class WorkerExitedError extends AgentFenseError {
  readonly code = 'AF_WORKER_EXITED';
  readonly exitCode: number | null;
  readonly signal: string | null;

  constructor(
    message: string,
    options: AgentFenseErrorOptions & { exitCode?: number | null; signal?: string | null } = {},
  ) {
    super(message, options);
    this.exitCode = options.exitCode ?? null;
    this.signal = options.signal ?? null;
  }
}
/** A bug or an unexpected failure; the message says what was being done. */
export class InternalError extends AgentFenseError {
  readonly code = 'AF_INTERNAL';
}

const CONSTRUCTORS: Record<
  ErrorCode,
  new (message: string, options?: AgentFenseErrorOptions) => AgentFenseError
> = {
  AF_INVALID_ARGUMENT: InvalidArgumentError,
  AF_NOT_FOUND: NotFoundError,
  AF_ALREADY_EXISTS: AlreadyExistsError,
  AF_WRONG_STATE: WrongStateError,
  AF_CONFLICT: ConflictError,
  AF_PERMISSION_DENIED: PermissionDeniedError,
  AF_NO_SPACE: NoSpaceError,
  AF_TIMEOUT: TimeoutError,
  AF_CANCELLED: CancelledError,
  AF_UNAVAILABLE: UnavailableError,
  AF_PROTOCOL: ProtocolError,
  AF_WORKER_EXITED: WorkerExitedError,
  AF_INTERNAL: InternalError,
};

/** True when `value` is one of the stable codes. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}

/** Rebuilds an error that arrived as `{ code, message }`; an unknown code becomes an InternalError. */
export function fromWire(wire: { code: unknown; message: unknown; details?: unknown }): AgentFenseError {
  const message = typeof wire.message === 'string' ? wire.message : 'error without a message';
  const details =
    wire.details !== null && typeof wire.details === 'object' && !Array.isArray(wire.details)
      ? (wire.details as Record<string, unknown>)
      : undefined;
  const options = details === undefined ? {} : { details };
  if (!isErrorCode(wire.code)) return new InternalError(`${String(wire.code)}: ${message}`, options);
  return new CONSTRUCTORS[wire.code](message, options);
}

/** Any thrown value as an AgentFenseError (foreign errors become InternalError with the cause kept). */
export function toAgentFenseError(err: unknown, context = 'unexpected error'): AgentFenseError {
  if (err instanceof AgentFenseError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new InternalError(`${context}: ${message}`, { cause: err });
}
