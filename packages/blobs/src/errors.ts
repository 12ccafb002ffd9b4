// Every failure of the blob store, a snapshot or the node cache is one of AgentFense's error classes with
// `details.reason` from one closed set, so a caller (the node agent, serve) can tell a missing blob from
// a tampered one without parsing messages.
import {
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  ProtocolError,
  UnavailableError,
  type AgentFenseError,
} from '@agentfense/protocol';

export const BLOB_ERROR_REASONS = [
  /** A digest that is not 64 lowercase hex characters. */
  'invalid-digest',
  /** No blob with that digest in the store. */
  'not-found',
  /** The bytes read or written do not hash to the digest they are stored or asked for under. */
  'digest-mismatch',
  /** A blob larger than the reader allows (a manifest) or than the manifest says (a file). */
  'too-large',
  /** A manifest that does not parse, is not sorted, repeats a path or names a parent that is no directory. */
  'invalid-manifest',
  /** A manifest path that is absolute, has `.`/`..` or empty components, or is too long. */
  'unsafe-path',
  /** A symlink whose target leaves the tree (absolute, or `..` past the root, through other links too). */
  'symlink-escape',
  /** A device, FIFO or socket in a codebase: a snapshot holds files, directories and symlinks only. */
  'special-file',
  /** A remote store (HTTP) that cannot be reached, does not answer in time, or fails its answer. */
  'unavailable',
  /** A remote store that refuses this reader's token (HTTP 401 or 403). */
  'denied',
] as const;

export type BlobErrorReason = (typeof BLOB_ERROR_REASONS)[number];

/** The error of one reason: its class follows what the caller did wrong (or what the store holds). */
export function blobError(
  reason: BlobErrorReason,
  message: string,
  details: Record<string, unknown> = {},
): AgentFenseError {
  const options = { details: { reason, ...details } };
  switch (reason) {
    case 'not-found':
      return new NotFoundError(message, options);
    case 'digest-mismatch':
    case 'too-large':
      // The store's bytes are not what their name promises: corruption or tampering, never served.
      return new ProtocolError(message, options);
    case 'symlink-escape':
    case 'special-file':
    case 'denied':
      return new PermissionDeniedError(message, options);
    case 'unavailable':
      return new UnavailableError(message, options);
    case 'invalid-digest':
    case 'invalid-manifest':
    case 'unsafe-path':
      return new InvalidArgumentError(message, options);
  }
}

/** The reason of an error made by blobError, or undefined. */
export function blobErrorReason(err: unknown): BlobErrorReason | undefined {
  const details = (err as { details?: { reason?: unknown } } | null)?.details;
  const reason = details?.reason;
  return (BLOB_ERROR_REASONS as readonly unknown[]).includes(reason)
    ? (reason as BlobErrorReason)
    : undefined;
}
