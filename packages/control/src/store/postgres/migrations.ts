// The PostgreSQL schema: the same tables and columns as SQLite's (store/db.ts, at its version 13), built
// by PostgreSQL's own numbered migrations, recorded in its `schema_migrations`. Times are ms since the
// epoch (BIGINT); JSON columns are text, as in SQLite, so one row codec serves both backends.
import type pg from 'pg';
import { UnavailableError } from '@agentfense/protocol';
import type { PostgresFailure } from './url.js';

/** Migrations, applied in order, each once, all in one transaction. Never edit one that has shipped. */
export const PG_MIGRATIONS: readonly { readonly version: number; readonly sql: string }[] = [
  {
    version: 1,
    sql: `
      -- Ids COLLATE "C": compared byte by byte, as SQLite does (listings' keyset pages rely on it).
      CREATE TABLE codebases (
        id            TEXT COLLATE "C" PRIMARY KEY,
        name          TEXT NOT NULL,
        owner_id      TEXT,
        kind          TEXT NOT NULL CHECK (kind IN ('stored', 'linked')),
        host_path     TEXT,
        host_identity TEXT,
        file_count    BIGINT,
        size_bytes    BIGINT,
        visibility    TEXT NOT NULL DEFAULT 'api' CHECK (visibility IN ('api', 'local')),
        created_at    BIGINT NOT NULL,
        updated_at    BIGINT NOT NULL
      );
      CREATE TABLE sandboxes (
        id                  TEXT COLLATE "C" PRIMARY KEY,
        codebase_id         TEXT NOT NULL REFERENCES codebases (id),
        state               TEXT NOT NULL CHECK (state IN ('PENDING', 'RUNNING', 'STOPPED', 'ERROR')),
        state_reason        TEXT,
        runtime             TEXT NOT NULL,
        image               TEXT,
        rules               TEXT NOT NULL,
        network             INTEGER NOT NULL,
        network_policy      TEXT,
        resources           TEXT NOT NULL,
        env                 TEXT NOT NULL,
        audit_allowed       INTEGER NOT NULL,
        labels              TEXT NOT NULL,
        expires_at          BIGINT,
        created_at          BIGINT NOT NULL,
        updated_at          BIGINT NOT NULL,
        started_at          BIGINT,
        stopped_at          BIGINT,
        owner_pid           INTEGER,
        owner_start         TEXT,
        owner_instance      TEXT,
        worker_pid          INTEGER,
        worker_start        TEXT,
        restart_count       INTEGER NOT NULL DEFAULT 0,
        last_restart_at     BIGINT,
        last_restart_reason TEXT,
        limits              TEXT,
        secrets             TEXT
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
      -- seq: insertion order among checkpoints of one millisecond (SQLite's rowid).
      CREATE TABLE checkpoints (
        seq         BIGSERIAL UNIQUE,
        id          TEXT PRIMARY KEY,
        sandbox_id  TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
        name        TEXT,
        message     TEXT,
        layers      TEXT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('pending', 'ready')),
        created_at  BIGINT NOT NULL
      );
      CREATE INDEX checkpoints_by_sandbox ON checkpoints (sandbox_id, created_at);
      CREATE TABLE sandbox_stacks (
        sandbox_id  TEXT PRIMARY KEY REFERENCES sandboxes (id) ON DELETE CASCADE,
        layers      TEXT NOT NULL
      );
      CREATE TABLE layers (
        id          TEXT PRIMARY KEY,
        maker_id    TEXT NOT NULL,
        bytes       BIGINT
      );
      CREATE INDEX layers_by_maker ON layers (maker_id);
      CREATE TABLE compactions (
        layer_id    TEXT PRIMARY KEY,
        from_layers TEXT NOT NULL,
        maker_id    TEXT NOT NULL
      );
    `,
  },
  {
    // SQLite's version 11: which sandbox holds each session of a placed sandbox.
    version: 2,
    sql: `
      CREATE TABLE placed_sessions (
        id          TEXT COLLATE "C" PRIMARY KEY,
        sandbox_id  TEXT COLLATE "C" NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
        created_at  BIGINT NOT NULL
      );
      CREATE INDEX placed_sessions_by_sandbox ON placed_sessions (sandbox_id);
    `,
  },
  {
    // SQLite's version 12: which warm placement serves which sandbox (claimed once, rows kept).
    version: 3,
    sql: `
      CREATE TABLE warm_claims (
        placement_id  TEXT COLLATE "C" PRIMARY KEY,
        sandbox_id    TEXT COLLATE "C" NOT NULL,
        claimed_at    BIGINT NOT NULL,
        released_at   BIGINT
      );
      CREATE INDEX warm_claims_by_sandbox ON warm_claims (sandbox_id);
    `,
  },
  {
    // SQLite's version 13: the snapshot a placed sandbox was attached on.
    version: 4,
    sql: 'ALTER TABLE sandboxes ADD COLUMN snapshot_id TEXT',
  },
];

/** Any 64-bit key of our own: replicas opening the same database at once migrate one after the other. */
const MIGRATION_LOCK = 0x4166_5f6d_6967;

/** Applies every migration newer than the database's version; refuses a database from a newer release. */
export async function migratePostgres(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)',
    );
    const { rows } = await client.query<{ v: number | null }>(
      'SELECT MAX(version) AS v FROM schema_migrations',
    );
    const current = rows[0]?.v ?? 0;
    const latest = PG_MIGRATIONS.at(-1)?.version ?? 0;
    if (current > latest) {
      throw new UnavailableError(
        `the metadata database has schema version ${current}, newer than this release knows (${latest})`,
        { details: { reason: 'schema-newer' satisfies PostgresFailure } },
      );
    }
    for (const m of PG_MIGRATIONS) {
      if (m.version <= current) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)', [
        m.version,
        Date.now(),
      ]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** The schema version the database is at. */
export async function postgresSchemaVersion(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_migrations');
  return rows[0]?.v ?? 0;
}

/** Runs `fn` on one connection inside BEGIN … COMMIT (ROLLBACK when it throws). */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
