// The metadata database (SQLite through better-sqlite3): opened in WAL mode so several control-plane
// processes can share one data directory, with numbered migrations recorded in `schema_migrations`.
import { chmodSync } from 'node:fs';
import Database from 'better-sqlite3';
import { UnavailableError } from '@agentfense/protocol';

export type Db = Database.Database;

/** Migrations, applied in order, each once and inside a transaction. Never edit one that has shipped. */
export const MIGRATIONS: readonly { readonly version: number; readonly sql: string }[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE codebases (
        id          TEXT PRIMARY KEY,
        name        TEXT NOT NULL,
        owner_id    TEXT,
        kind        TEXT NOT NULL CHECK (kind IN ('stored', 'linked')),
        host_path   TEXT,
        file_count  INTEGER,
        size_bytes  INTEGER,
        created_at  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL
      );
      CREATE TABLE sandboxes (
        id                  TEXT PRIMARY KEY,
        codebase_id         TEXT NOT NULL REFERENCES codebases (id),
        state               TEXT NOT NULL CHECK (state IN ('PENDING', 'RUNNING', 'STOPPED', 'ERROR')),
        state_reason        TEXT,
        runtime             TEXT NOT NULL,
        rules               TEXT NOT NULL,
        network             INTEGER NOT NULL,
        resources           TEXT NOT NULL,
        env                 TEXT NOT NULL,
        audit_allowed       INTEGER NOT NULL,
        labels              TEXT NOT NULL,
        expires_at          INTEGER,
        created_at          INTEGER NOT NULL,
        updated_at          INTEGER NOT NULL,
        started_at          INTEGER,
        stopped_at          INTEGER,
        owner_pid           INTEGER,
        owner_start         TEXT,
        owner_instance      TEXT,
        worker_pid          INTEGER,
        worker_start        TEXT,
        restart_count       INTEGER NOT NULL DEFAULT 0,
        last_restart_at     INTEGER,
        last_restart_reason TEXT
      );
      CREATE INDEX sandboxes_by_codebase ON sandboxes (codebase_id);
      CREATE INDEX sandboxes_by_created ON sandboxes (created_at, id);
      CREATE TABLE sandbox_labels (
        sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
        key        TEXT NOT NULL,
        value      TEXT NOT NULL,
        PRIMARY KEY (sandbox_id, key)
      );
      CREATE INDEX sandbox_labels_by_kv ON sandbox_labels (key, value);
    `,
  },
  {
    // The limits the runtime reported as enforced at the last start (contract §4), as JSON.
    version: 2,
    sql: 'ALTER TABLE sandboxes ADD COLUMN limits TEXT',
  },
  {
    // Container image of a docker sandbox (null: the runtime's default image).
    version: 3,
    sql: 'ALTER TABLE sandboxes ADD COLUMN image TEXT',
  },
  {
    // The network policy (mode and rules) as JSON; `network` stays its on/off summary. Null in rows of
    // older releases: their `network` flag decides (on = mode open; the host's namespace is never shared).
    version: 4,
    sql: 'ALTER TABLE sandboxes ADD COLUMN network_policy TEXT',
  },
  {
    // A linked codebase's directory identity, "<dev>:<ino>" (null: recorded on first use).
    version: 5,
    sql: 'ALTER TABLE codebases ADD COLUMN host_identity TEXT',
  },
  {
    // Who may reach a codebase (docs/security.md): 'api' (the HTTP, gRPC and /mcp faces too) or 'local'
    // (only processes that open the data directory: a directory linked by `run`, `shell`, `mcp`, the
    // library). Every linked codebase so far was linked locally; stored ones are shared as they were.
    version: 6,
    sql: `
      ALTER TABLE codebases ADD COLUMN visibility TEXT NOT NULL DEFAULT 'api'
        CHECK (visibility IN ('api', 'local'));
      UPDATE codebases SET visibility = 'local' WHERE kind = 'linked';
    `,
  },
  {
    // A sandbox's secrets as JSON: name, binding, placeholder and source (env, file, command, or null
    // for one given by value), never a value (docs/secrets.md). Null in older rows: no secrets kept.
    version: 7,
    sql: 'ALTER TABLE sandboxes ADD COLUMN secrets TEXT',
  },
  {
    // Checkpoints: each names the stack of frozen layers (JSON array of layer ids, oldest first) its
    // sandbox stood on when it was taken; 'pending' while the worker freezes the layer (a crash then
    // leaves a row the next mount settles). sandbox_stacks mirrors the stack each delta records itself.
    version: 8,
    sql: `
      CREATE TABLE checkpoints (
        id          TEXT PRIMARY KEY,
        sandbox_id  TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
        name        TEXT,
        message     TEXT,
        layers      TEXT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('pending', 'ready')),
        created_at  INTEGER NOT NULL
      );
      CREATE INDEX checkpoints_by_sandbox ON checkpoints (sandbox_id, created_at);
      CREATE TABLE sandbox_stacks (
        sandbox_id  TEXT PRIMARY KEY REFERENCES sandboxes (id) ON DELETE CASCADE,
        layers      TEXT NOT NULL
      );
    `,
  },
  {
    // Frozen layers and what each costs the sandbox that made it (its disk quota counts them): bytes in
    // the quota's measure, null until measured (a layer a crash left between the worker and this row).
    // No foreign key: a layer outlives its maker while a fork stands on it (then it is charged to nobody).
    version: 9,
    sql: `
      CREATE TABLE layers (
        id          TEXT PRIMARY KEY,
        maker_id    TEXT NOT NULL,
        bytes       INTEGER
      );
      CREATE INDEX layers_by_maker ON layers (maker_id);
    `,
  },
  {
    // A stack compaction under way: the merged layer and the adjacent pair it replaces (JSON array of two
    // layer ids), made by one sandbox. While a row exists none of the three leaves the disk; recovery at
    // open finishes or drops it (sandboxes/compactor.ts).
    version: 10,
    sql: `
      CREATE TABLE compactions (
        layer_id    TEXT PRIMARY KEY,
        from_layers TEXT NOT NULL,
        maker_id    TEXT NOT NULL
      );
    `,
  },
  {
    // Sessions of sandboxes placed on cluster nodes: the shell runs on the node, this says which sandbox
    // (so which node agent) holds it, so any API replica routes a call that names only the session.
    version: 11,
    sql: `
      CREATE TABLE placed_sessions (
        id          TEXT PRIMARY KEY,
        sandbox_id  TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
        created_at  INTEGER NOT NULL
      );
      CREATE INDEX placed_sessions_by_sandbox ON placed_sessions (sandbox_id);
    `,
  },
  {
    // Which warm placement (a container placed ahead of time) serves which sandbox: the key decides
    // which of two replicas claims it; rows are kept, so a placement is never claimed twice.
    version: 12,
    sql: `
      CREATE TABLE warm_claims (
        placement_id  TEXT PRIMARY KEY,
        sandbox_id    TEXT NOT NULL,
        claimed_at    INTEGER NOT NULL,
        released_at   INTEGER
      );
      CREATE INDEX warm_claims_by_sandbox ON warm_claims (sandbox_id);
    `,
  },
  {
    // The snapshot a placed sandbox's node attached it on (serve --blobs): its delta is relative to it.
    version: 13,
    sql: 'ALTER TABLE sandboxes ADD COLUMN snapshot_id TEXT',
  },
];

/** How long a writer waits for another process's transaction before failing (ms). */
const BUSY_TIMEOUT_MS = 5000;

/** Opens (creating if needed) the database at `file` and brings its schema up to date. */
export function openDatabase(file: string): Db {
  let db: Db;
  try {
    db = new Database(file);
  } catch (err) {
    throw new UnavailableError(`cannot open the metadata database ${file}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  // Sandbox env (which may hold tokens) is stored here: owner-only, like the data directory.
  if (file !== ':memory:') chmodSync(file, 0o600);
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  db.pragma('synchronous = NORMAL');
  migrate(db);
  return db;
}

/** Applies every migration newer than the database's version; refuses a database from a newer release. */
export function migrate(db: Db): void {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
  );
  // IMMEDIATE: two processes opening a fresh data dir at once must not both apply migration 1.
  db.transaction(() => {
    const row = db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as {
      v: number | null;
    };
    const current = row.v ?? 0;
    const latest = MIGRATIONS.at(-1)?.version ?? 0;
    if (current > latest) {
      throw new UnavailableError(
        `the metadata database has schema version ${current}, newer than this release knows (${latest})`,
      );
    }
    const record = db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)');
    for (const m of MIGRATIONS) {
      if (m.version <= current) continue;
      db.exec(m.sql);
      record.run(m.version, Date.now());
    }
  }).immediate();
}

/** The schema version the database is at. */
export function schemaVersion(db: Db): number {
  const row = db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null };
  return row.v ?? 0;
}
