// Which sandbox holds each session of a sandbox placed on a cluster node (`placed_sessions`). The shell
// and its state live on the node (the node agent runs it); this record only lets any API replica route a
// call that names the session alone. A record outlives its shell when the node or the shell ends: the
// node agent then answers "not found" and the record is dropped. SQLite here; PostgreSQL in
// postgres/placed-sessions.ts.
import type { Db } from './db.js';

export interface PlacedSessionStore {
  insert(row: { readonly id: string; readonly sandboxId: string; readonly createdAt: number }): Promise<void>;
  /** The sandbox holding session `id`, or undefined. */
  sandboxOf(id: string): Promise<string | undefined>;
  delete(id: string): Promise<void>;
  /** Forgets every session of a sandbox (stopped or destroyed: its shells ended with its attach). */
  deleteBySandbox(sandboxId: string): Promise<void>;
}

export class SqlitePlacedSessionStore implements PlacedSessionStore {
  constructor(private readonly db: Db) {}

  insert(row: { id: string; sandboxId: string; createdAt: number }): Promise<void> {
    this.db
      .prepare('INSERT INTO placed_sessions (id, sandbox_id, created_at) VALUES (?, ?, ?)')
      .run(row.id, row.sandboxId, row.createdAt);
    return Promise.resolve();
  }

  sandboxOf(id: string): Promise<string | undefined> {
    const row = this.db.prepare('SELECT sandbox_id FROM placed_sessions WHERE id = ?').get(id) as
      { sandbox_id: string } | undefined;
    return Promise.resolve(row?.sandbox_id);
  }

  delete(id: string): Promise<void> {
    this.db.prepare('DELETE FROM placed_sessions WHERE id = ?').run(id);
    return Promise.resolve();
  }

  deleteBySandbox(sandboxId: string): Promise<void> {
    this.db.prepare('DELETE FROM placed_sessions WHERE sandbox_id = ?').run(sandboxId);
    return Promise.resolve();
  }
}
