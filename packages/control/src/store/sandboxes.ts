// The sandbox records: what every backend (SQLite in sqlite-sandboxes.ts, PostgreSQL in
// postgres/sandboxes.ts) offers over `sandboxes` and `sandbox_labels`. Every call is asynchronous; the
// SQLite one does its work before it returns, as the synchronous driver always did.
import type { PageCursor } from './pagination.js';
import type { NewSandboxRow, SandboxPatch, SandboxRow } from './sandbox-rows.js';
import type { SandboxState } from '../sandboxes/types.js';

export type { NewSandboxRow, SandboxPatch, SandboxRow } from './sandbox-rows.js';
export { sandboxInfo } from './sandbox-rows.js';

export interface SandboxQuery {
  readonly codebaseId?: string | undefined;
  readonly state?: SandboxState | undefined;
  readonly labels?: Readonly<Record<string, string>> | undefined;
  /** Leaves out sandboxes that carry any of these label keys. */
  readonly withoutLabelKeys?: readonly string[] | undefined;
  /** Only sandboxes over codebases of this visibility (the API faces ask for 'api'). */
  readonly codebaseVisibility?: 'api' | 'local' | undefined;
  readonly after?: PageCursor | undefined;
  readonly limit: number;
}

export interface SandboxStore {
  /** Inserts a sandbox and its labels (filterable through sandbox_labels) in one transaction. */
  insert(row: NewSandboxRow): Promise<void>;
  find(id: string): Promise<SandboxRow | undefined>;
  /** The row; NotFoundError naming the id when there is none. */
  get(id: string): Promise<SandboxRow>;
  /** Updates the given columns (and updated_at). */
  update(id: string, patch: SandboxPatch): Promise<void>;
  /**
   * Reads the row and writes what `decide` returns (nothing when undefined) in one transaction that holds
   * the row against every other process or replica between the read and the write (claiming ownership).
   * `decide` may throw to leave the row as it is. Resolves to the row as it was read.
   */
  updateLocked(id: string, decide: (row: SandboxRow) => SandboxPatch | undefined): Promise<SandboxRow>;
  /**
   * Removes one label from the row's labels and from sandbox_labels in one transaction (listings and the
   * reported labels change together). False when the sandbox has no such label.
   */
  removeLabel(id: string, key: string): Promise<boolean>;
  /** Ids of the codebases used by a sandbox that carries the label key. */
  codebasesWithLabel(key: string): Promise<string[]>;
  delete(id: string): Promise<void>;
  countByCodebase(codebaseId: string): Promise<number>;
  all(): Promise<SandboxRow[]>;
  expired(now: number): Promise<SandboxRow[]>;
  /** Filtered, keyset-paginated listing ordered by (created_at, id). */
  query(q: SandboxQuery): Promise<SandboxRow[]>;
}
