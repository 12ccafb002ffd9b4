// Warm placement claims in PostgreSQL (the same queries as SQLite's, store/warm-claims.ts): the insert on
// the primary key decides a race between replicas, as it does there.
import type pg from 'pg';
import type { WarmClaimStore } from '../warm-claims.js';

export class PostgresWarmClaimStore implements WarmClaimStore {
  constructor(private readonly pool: pg.Pool) {}

  async claim(row: { placementId: string; sandboxId: string; at: number }): Promise<boolean> {
    const r = await this.pool.query(
      'INSERT INTO warm_claims (placement_id, sandbox_id, claimed_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
      [row.placementId, row.sandboxId, row.at],
    );
    return r.rowCount === 1;
  }

  async placementOf(sandboxId: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ placement_id: string }>(
      'SELECT placement_id FROM warm_claims WHERE sandbox_id = $1 AND released_at IS NULL',
      [sandboxId],
    );
    return rows[0]?.placement_id;
  }

  async sandboxOf(placementId: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ sandbox_id: string }>(
      'SELECT sandbox_id FROM warm_claims WHERE placement_id = $1 AND released_at IS NULL',
      [placementId],
    );
    return rows[0]?.sandbox_id;
  }

  async release(sandboxId: string, at: number): Promise<void> {
    await this.pool.query(
      'UPDATE warm_claims SET released_at = $1 WHERE sandbox_id = $2 AND released_at IS NULL',
      [at, sandboxId],
    );
  }

  async claimedAt(placementId: string): Promise<number | undefined> {
    const { rows } = await this.pool.query<{ claimed_at: string }>(
      'SELECT claimed_at FROM warm_claims WHERE placement_id = $1',
      [placementId],
    );
    return rows[0] === undefined ? undefined : Number(rows[0].claimed_at);
  }

  async releasePlacement(placementId: string, at: number): Promise<void> {
    await this.pool.query(
      'UPDATE warm_claims SET released_at = $1 WHERE placement_id = $2 AND released_at IS NULL',
      [at, placementId],
    );
  }
}
