// The metadata store of a control plane: its sandbox, codebase and checkpoint records in one backend.
// SQLite in the data directory is the embedded default; a PostgreSQL URL (`serve --database`) puts them
// in a database several API replicas share (docs/scale-out.md). The PostgreSQL code is loaded only then.
import type { CheckpointStore } from './checkpoints.js';
import type { CodebaseStore } from './codebases.js';
import { SqliteCodebaseStore } from './codebases.js';
import { openDatabase } from './db.js';
import { SqlitePlacedSessionStore, type PlacedSessionStore } from './placed-sessions.js';
import type { SandboxStore } from './sandboxes.js';
import { SqliteCheckpointStore } from './sqlite-checkpoints.js';
import { SqliteSandboxStore } from './sqlite-sandboxes.js';
import { SqliteWarmClaimStore, type WarmClaimStore } from './warm-claims.js';

export interface MetadataStore {
  /** Which backend holds the records. */
  readonly backend: 'sqlite' | 'postgres';
  readonly sandboxes: SandboxStore;
  readonly codebases: CodebaseStore;
  readonly checkpoints: CheckpointStore;
  /** Which sandbox holds each session of a sandbox placed on a cluster node. */
  readonly placedSessions: PlacedSessionStore;
  /** Which warm placement (placed ahead of time on a cluster) serves which sandbox. */
  readonly warmClaims: WarmClaimStore;
  /** Closes the connection (SQLite) or ends the pool (PostgreSQL). */
  close(): Promise<void>;
}

export interface OpenMetadataOptions {
  /** The SQLite file in the data directory (used when `database` is not given). */
  readonly sqliteFile: string;
  /** A `postgres://` or `postgresql://` URL: the records live there instead. */
  readonly database?: string | undefined;
}

/** Opens the store (creating the schema, or bringing it up to date, as needed). */
export async function openMetadataStore(options: OpenMetadataOptions): Promise<MetadataStore> {
  if (options.database !== undefined) {
    const { openPostgresStore } = await import('./postgres/open.js');
    return openPostgresStore({ url: options.database });
  }
  const db = openDatabase(options.sqliteFile);
  return {
    backend: 'sqlite',
    sandboxes: new SqliteSandboxStore(db),
    codebases: new SqliteCodebaseStore(db),
    checkpoints: new SqliteCheckpointStore(db),
    placedSessions: new SqlitePlacedSessionStore(db),
    warmClaims: new SqliteWarmClaimStore(db),
    close: () => {
      db.close();
      return Promise.resolve();
    },
  };
}
