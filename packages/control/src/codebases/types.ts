// Public shapes of codebases and their files.

/** `stored`: files uploaded into the data directory. `linked`: a host directory used in place. */
export type CodebaseKind = 'stored' | 'linked';

/**
 * Who may reach a codebase: `api` — the HTTP, gRPC and /mcp faces as well as local processes; `local` —
 * only processes that open the data directory themselves (a directory linked by `run`, `shell`, `mcp` or
 * the library, unless linked with `apiVisible: true`). API clients get "not found" for a local one.
 */
export type CodebaseVisibility = 'api' | 'local';

/** A codebase as clients see it. Times are ISO 8601 strings. */
export interface CodebaseInfo {
  readonly id: string;
  readonly name: string;
  readonly ownerId: string | null;
  readonly kind: CodebaseKind;
  /** The directory the sandboxes see as /workspace (for a linked codebase, the user's directory). */
  readonly path: string;
  /** Regular files and total bytes (stored codebases; null for linked ones, which are never walked). */
  readonly fileCount: number | null;
  readonly sizeBytes: number | null;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** One entry of a codebase listing. `path` is a codebase path (`/src/a.ts`). */
export interface FileEntry {
  readonly path: string;
  readonly size: number;
  readonly isDir: boolean;
  readonly modifiedAt: string;
}
