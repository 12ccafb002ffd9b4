// Opens the metadata store in PostgreSQL (`serve --database postgres://…`): the URL checked, the pool
// made, the schema brought up to date (which is also the check that the server answers).
import type { MetadataStore } from '../metadata.js';
import { PostgresCheckpointStore } from './checkpoints.js';
import { PostgresCodebaseStore } from './codebases.js';
import { connectionError, createPool } from './connect.js';
import { checkPostgresUrl } from './url.js';
import { migratePostgres } from './migrations.js';
import { PostgresPlacedSessionStore } from './placed-sessions.js';
import { PostgresWarmClaimStore } from './warm-claims.js';
import { PostgresSandboxStore } from './sandboxes.js';

export async function openPostgresStore(options: { readonly url: string }): Promise<MetadataStore> {
  checkPostgresUrl(options.url);
  const pool = createPool(options.url);
  try {
    await migratePostgres(pool);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw connectionError(err, options.url);
  }
  return {
    backend: 'postgres',
    sandboxes: new PostgresSandboxStore(pool),
    codebases: new PostgresCodebaseStore(pool),
    checkpoints: new PostgresCheckpointStore(pool),
    placedSessions: new PostgresPlacedSessionStore(pool),
    warmClaims: new PostgresWarmClaimStore(pool),
    close: () => pool.end(),
  };
}
