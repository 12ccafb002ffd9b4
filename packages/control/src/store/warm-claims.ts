// Which warm placement serves which sandbox (`warm_claims`). A warm placement is a sandbox container the
// orchestrator placed ahead of time with no sandbox of its own (no codebase, no rules); a start claims one
// here, and the database decides the race: the placement id is the key, so of two replicas claiming it
// exactly one inserts. Rows are never deleted or handed back: a placement claimed once is never claimed
// again, whatever became of its sandbox. Released rows (the sandbox stopped, its placement removed) stay
// as that record. SQLite here; PostgreSQL in postgres/warm-claims.ts.
import type { Db } from './db.js';

export interface WarmClaimStore {
  /** Claims `placementId` for `sandboxId`; false when it was claimed before (by anyone). */
  claim(row: {
    readonly placementId: string;
    readonly sandboxId: string;
    readonly at: number;
  }): Promise<boolean>;
  /** The warm placement serving `sandboxId` now (claimed and not released), or undefined. */
  placementOf(sandboxId: string): Promise<string | undefined>;
  /** The sandbox a claimed placement serves now, or undefined. */
  sandboxOf(placementId: string): Promise<string | undefined>;
  /** The sandbox's placement was removed: its claim no longer routes anything. */
  release(sandboxId: string, at: number): Promise<void>;
  /** When `placementId` was claimed (released or not), or undefined: never claimed. */
  claimedAt(placementId: string): Promise<number | undefined>;
  /** The placement was removed (its claim never finished): its claim no longer routes anything. */
  releasePlacement(placementId: string, at: number): Promise<void>;
}

export class SqliteWarmClaimStore implements WarmClaimStore {
  constructor(private readonly db: Db) {}

  claim(row: { placementId: string; sandboxId: string; at: number }): Promise<boolean> {
    const r = this.db
      .prepare(
        'INSERT INTO warm_claims (placement_id, sandbox_id, claimed_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
      )
      .run(row.placementId, row.sandboxId, row.at);
    return Promise.resolve(r.changes === 1);
  }

  placementOf(sandboxId: string): Promise<string | undefined> {
    const row = this.db
      .prepare('SELECT placement_id FROM warm_claims WHERE sandbox_id = ? AND released_at IS NULL')
      .get(sandboxId) as { placement_id: string } | undefined;
    return Promise.resolve(row?.placement_id);
  }

  sandboxOf(placementId: string): Promise<string | undefined> {
    const row = this.db
      .prepare('SELECT sandbox_id FROM warm_claims WHERE placement_id = ? AND released_at IS NULL')
      .get(placementId) as { sandbox_id: string } | undefined;
    return Promise.resolve(row?.sandbox_id);
  }

  release(sandboxId: string, at: number): Promise<void> {
    this.db
      .prepare('UPDATE warm_claims SET released_at = ? WHERE sandbox_id = ? AND released_at IS NULL')
      .run(at, sandboxId);
    return Promise.resolve();
  }

  claimedAt(placementId: string): Promise<number | undefined> {
    const row = this.db
      .prepare('SELECT claimed_at FROM warm_claims WHERE placement_id = ?')
      .get(placementId) as { claimed_at: number } | undefined;
    return Promise.resolve(row?.claimed_at);
  }

  releasePlacement(placementId: string, at: number): Promise<void> {
    this.db
      .prepare('UPDATE warm_claims SET released_at = ? WHERE placement_id = ? AND released_at IS NULL')
      .run(at, placementId);
    return Promise.resolve();
  }
}
