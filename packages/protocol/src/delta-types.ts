// Plain-data types of the delta layer and audit trail, shared by the worker (which produces them) and
// the control plane (which serves them to users). All paths are codebase paths: '/' is the root.

/** One entry of a sandbox's change set. */
export interface ChangeEntry {
  readonly path: string;
  readonly kind: 'added' | 'modified' | 'deleted';
  readonly type: 'file' | 'directory' | 'symlink' | 'other';
  /** Size in bytes of the new content (null for deletions and directories). */
  readonly size: number | null;
  /**
   * Permission bits (of 0o7777) a commit writes, for added and modified files and directories: the
   * sandbox's, without set-id bits (commit strips them, CommitResult.changed says so).
   */
  readonly mode?: number;
  /** Permission bits of the codebase entry the sandbox first saw, for modified entries. */
  readonly oldMode?: number;
  /** The link target a commit writes, for added and modified symlinks. */
  readonly target?: string;
}

/** How a commit treats files that changed in the codebase since the sandbox first saw them. */
export type CommitMode = 'detect-conflicts' | 'last-writer-wins';

/** A file whose codebase version changed since the sandbox based its change on it. */
export interface CommitConflict {
  readonly path: string;
  readonly reason: string;
}

/** An entry commit did not write exactly as the sandbox had it, and why (never silent). */
export interface CommitNote {
  readonly path: string;
  readonly reason: string;
}

export interface CommitResult {
  /** Changes written to the codebase. */
  readonly applied: readonly ChangeEntry[];
  /** Changes not written because of a conflict (kept in the delta). Empty in last-writer-wins mode. */
  readonly conflicts: readonly CommitConflict[];
  /** Entries never written to the codebase: device nodes, FIFOs, sockets (kept in the delta). */
  readonly skipped?: readonly CommitNote[];
  /** Entries written with a change, e.g. set-uid/set-gid bits removed (also listed in `applied`). */
  readonly changed?: readonly CommitNote[];
  /**
   * Set when the commit stopped before the end (the sandbox was stopped or destroyed meanwhile): why.
   * `applied` then lists exactly what was written (each file completely, none half-written); the rest
   * stays in the delta, and the commit stays unfinished: the next commit of the sandbox finishes it first.
   */
  readonly interrupted?: string;
}

/** One access decision made by the worker. */
export interface AuditEvent {
  /** Monotonic per worker. */
  readonly seq: number;
  /** Milliseconds since the epoch. */
  readonly time: number;
  /** The filesystem operation, e.g. 'lookup', 'open', 'write', 'unlink', 'rename'. */
  readonly op: string;
  readonly path: string;
  /** Second path of rename/link. */
  readonly target?: string;
  readonly decision: 'allow' | 'deny';
  /** The permission that applied to `path`. */
  readonly permission: 'none' | 'view' | 'read' | 'write';
  /** Errno name returned on denial ('ENOENT', 'EACCES', 'EXDEV', ...). */
  readonly errno?: string;
  /** Process id of the caller as the kernel reports it (host pid namespace). */
  readonly pid?: number;
  /**
   * Set by the control plane's trail on a record that stands for this many denials of the same op, errno
   * and permission within one second, not written one by one; the fields are the first one's.
   */
  readonly similar?: number;
}
