// Session records of placed sandboxes in PostgreSQL (the same queries as SQLite's, store/placed-sessions.ts).
import type pg from 'pg';
import type { PlacedSessionStore } from '../placed-sessions.js';

export class PostgresPlacedSessionStore implements PlacedSessionStore {
  constructor(private readonly pool: pg.Pool) {}

  async insert(row: { id: string; sandboxId: string; createdAt: number }): Promise<void> {
    await this.pool.query('INSERT INTO placed_sessions (id, sandbox_id, created_at) VALUES ($1, $2, $3)', [
      row.id,
      row.sandboxId,
      row.createdAt,
    ]);
  }

  async sandboxOf(id: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ sandbox_id: string }>(
      'SELECT sandbox_id FROM placed_sessions WHERE id = $1',
      [id],
    );
    return rows[0]?.sandbox_id;
  }

  async delete(id: string): Promise<void> {
    await this.pool.query('DELETE FROM placed_sessions WHERE id = $1', [id]);
  }

  async deleteBySandbox(sandboxId: string): Promise<void> {
    await this.pool.query('DELETE FROM placed_sessions WHERE sandbox_id = $1', [sandboxId]);
  }
}
