// Errors of the FUSE worker and the one mapping from any thrown value to the errno a filesystem op returns.
import { constants } from 'node:os';

import { AgentFenseError, type AgentFenseErrorOptions, type ErrorCode } from '@agentfense/protocol';

/** The AgentFense kind each errno belongs to (for logs and the wire); anything unlisted is internal. */
const KIND_OF_ERRNO: Readonly<Record<string, ErrorCode>> = {
  ENOENT: 'AF_NOT_FOUND',
  EACCES: 'AF_PERMISSION_DENIED',
  EPERM: 'AF_PERMISSION_DENIED',
  EEXIST: 'AF_ALREADY_EXISTS',
  ENOTEMPTY: 'AF_CONFLICT',
  EBUSY: 'AF_CONFLICT',
  EXDEV: 'AF_WRONG_STATE',
  EINVAL: 'AF_INVALID_ARGUMENT',
  ENOTDIR: 'AF_INVALID_ARGUMENT',
  EISDIR: 'AF_INVALID_ARGUMENT',
  ELOOP: 'AF_INVALID_ARGUMENT',
  ENAMETOOLONG: 'AF_INVALID_ARGUMENT',
  ENOTSUP: 'AF_INVALID_ARGUMENT',
  ETIMEDOUT: 'AF_TIMEOUT',
  ECANCELED: 'AF_CANCELLED',
  ENOSPC: 'AF_NO_SPACE',
  EDQUOT: 'AF_NO_SPACE',
};

/** The errno each AgentFense kind becomes at the FUSE boundary. */
const ERRNO_OF_KIND: Readonly<Record<ErrorCode, string>> = {
  AF_INVALID_ARGUMENT: 'EINVAL',
  AF_NOT_FOUND: 'ENOENT',
  AF_ALREADY_EXISTS: 'EEXIST',
  AF_WRONG_STATE: 'EBUSY',
  AF_CONFLICT: 'EBUSY',
  AF_PERMISSION_DENIED: 'EACCES',
  AF_NO_SPACE: 'ENOSPC',
  AF_TIMEOUT: 'ETIMEDOUT',
  AF_CANCELLED: 'EINTR',
  AF_UNAVAILABLE: 'EIO',
  AF_PROTOCOL: 'EIO',
  AF_WORKER_EXITED: 'EIO',
  AF_INTERNAL: 'EIO',
};

/** A filesystem error with a definite errno, thrown by the delta layer and the op handlers. */
export class FsError extends AgentFenseError {
  readonly code: ErrorCode;
  /** Errno name, e.g. 'ENOENT'. */
  readonly errnoName: string;
  /** Positive errno number, e.g. 2. */
  readonly errno: number;

  constructor(errnoName: string, message: string, options: AgentFenseErrorOptions = {}) {
    super(`${errnoName}: ${message}`, options);
    this.errnoName = errnoName;
    this.errno = errnoNumber(errnoName);
    this.code = KIND_OF_ERRNO[errnoName] ?? 'AF_INTERNAL';
  }
}

/** The errno name a filesystem op should return for `err` (EIO for anything unexpected). */
export function toErrnoName(err: unknown): string {
  if (err instanceof FsError) return err.errnoName;
  if (err instanceof AgentFenseError) return ERRNO_OF_KIND[err.code];
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (typeof code === 'string' && code in constants.errno) return code;
  return 'EIO';
}

/** The positive errno number a filesystem op answers `err` with (what `req.replyErr` takes). */
export function toErrno(err: unknown): number {
  return errnoNumber(toErrnoName(err));
}

/**
 * True when `err` says the host has no room left (ENOSPC, EDQUOT), as a Node error or an FsError (a
 * sandbox's own quota included).
 */
export function isNoSpace(err: unknown): boolean {
  const code = err instanceof FsError ? err.errnoName : (err as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

/** Wraps a Node fs error (or passes an FsError through) so callers see one error type. */
export function asFsError(err: unknown, context: string): FsError {
  if (err instanceof FsError) return err;
  return new FsError(toErrnoName(err), `${context}: ${err instanceof Error ? err.message : String(err)}`, {
    cause: err,
  });
}

/** Runs `fn` with its errors as FsError; a TypeError (a bug, or a bad argument) passes through. */
export async function guard<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof TypeError) throw err;
    throw asFsError(err, what);
  }
}

/** guard() for a synchronous `fn`. */
export function guardSync<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof TypeError) throw err;
    throw asFsError(err, what);
  }
}

function errnoNumber(name: string): number {
  return (constants.errno as Record<string, number | undefined>)[name] ?? constants.errno.EIO;
}
