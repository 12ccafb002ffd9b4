// A full filesystem, said the same way on every face: the host errors that mean "no room left" (ENOSPC,
// EDQUOT, SQLite's SQLITE_FULL) become one NoSpaceError (AF_NO_SPACE) naming the data directory and
// what frees room. Each face then maps that kind once (HTTP 507, gRPC RESOURCE_EXHAUSTED, the message
// in MCP and the CLI); MCP names no host path, so the message can be written without the directory.
import { AgentFenseError, NoSpaceError } from '@agentfense/protocol/core';

/** Host error codes that mean the filesystem (or a quota on it) has no room left. */
const NO_SPACE_CODES: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL']);

/** The host code (ENOSPC, EDQUOT, SQLITE_FULL) when `err`, or an error it wraps, means no room left. */
export function noSpaceCode(err: unknown): string | undefined {
  let current: unknown = err;
  for (let depth = 0; current instanceof Error && depth < 8; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && NO_SPACE_CODES.has(code)) return code;
    // A worker's FsError crossed the wire as AF_NO_SPACE with its errno at the start of the message.
    if (code === 'AF_NO_SPACE') return /^(ENOSPC|EDQUOT)\b/.exec(current.message)?.[1] ?? 'ENOSPC';
    current = current.cause;
  }
  return undefined;
}

/** What a no-space error says: where, while doing what, why, and what frees room. */
export interface NoSpaceFacts {
  /** The full directory; absent where host paths are not shown (MCP). */
  readonly directory?: string;
  /** What was being done, e.g. "creating a codebase". */
  readonly operation: string;
  /** The host's code: ENOSPC, EDQUOT or SQLITE_FULL. */
  readonly reason: string;
}

/** The message of a NoSpaceError. */
export function noSpaceMessage(facts: NoSpaceFacts): string {
  const where =
    facts.directory === undefined ? 'the data directory' : `the data directory ${facts.directory}`;
  return (
    `no space left in ${where} while ${facts.operation} (${facts.reason}): free space on its ` +
    'filesystem, or discard sandbox changes and destroy sandboxes and codebases that are no longer ' +
    'needed, then retry'
  );
}

/**
 * `err` as a NoSpaceError naming `directory` when it means the filesystem there is full, else `err`
 * unchanged. Errors of other kinds keep theirs (only an internal error may hide a full disk), and a
 * sandbox's own disk quota keeps its message, which names the quota, not the data directory.
 */
export function asNoSpaceError(err: unknown, where: { directory: string; operation: string }): unknown {
  if (err instanceof NoSpaceError && err.details?.['directory'] !== undefined) return err;
  if (err instanceof NoSpaceError && err.details?.['quotaBytes'] !== undefined) return err;
  if (err instanceof AgentFenseError && err.code !== 'AF_INTERNAL' && err.code !== 'AF_NO_SPACE') return err;
  const reason = noSpaceCode(err);
  if (reason === undefined) return err;
  const facts: NoSpaceFacts = { ...where, reason };
  return new NoSpaceError(noSpaceMessage(facts), { cause: err, details: { ...facts } });
}
