// Sandbox records in SQLite: prepared statements over `sandboxes` and `sandbox_labels` (better-sqlite3 is
// synchronous: each call does its work before its promise is returned).
import type { Statement } from 'better-sqlite3';
import { NotFoundError } from '@agentfense/protocol';
import type { Db } from './db.js';
import { resolved } from './resolved.js';
import { PATCHABLE, decode, encode } from './sandbox-rows.js';
import type { NewSandboxRow, SandboxPatch, SandboxRow, StoredRow } from './sandbox-rows.js';
import type { SandboxQuery, SandboxStore } from './sandboxes.js';

export class SqliteSandboxStore implements SandboxStore {
  readonly #db: Db;
  readonly #insert: Statement;
  readonly #insertLabel: Statement;
  readonly #get: Statement<[string], StoredRow>;
  readonly #byCodebase: Statement<[string], { n: number }>;
  readonly #delete: Statement<[string]>;
  readonly #all: Statement<[], StoredRow>;
  readonly #expired: Statement<[number], StoredRow>;

  constructor(db: Db) {
    this.#db = db;
    this.#insert = db.prepare(
      `INSERT INTO sandboxes (id, codebase_id, state, state_reason, runtime, image, rules, network, network_policy,
         resources, env, audit_allowed, labels, expires_at, created_at, updated_at, owner_pid, owner_start,
         owner_instance, secrets)
       VALUES (@id, @codebase_id, @state, @state_reason, @runtime, @image, @rules, @network, @network_policy,
         @resources, @env,
         @audit_allowed, @labels, @expires_at, @created_at, @updated_at, @owner_pid, @owner_start, @owner_instance,
         @secrets)`,
    );
    this.#insertLabel = db.prepare('INSERT INTO sandbox_labels (sandbox_id, key, value) VALUES (?, ?, ?)');
    this.#get = db.prepare('SELECT * FROM sandboxes WHERE id = ?');
    this.#byCodebase = db.prepare('SELECT COUNT(*) AS n FROM sandboxes WHERE codebase_id = ?');
    this.#delete = db.prepare('DELETE FROM sandboxes WHERE id = ?');
    this.#all = db.prepare('SELECT * FROM sandboxes ORDER BY created_at, id');
    this.#expired = db.prepare(
      'SELECT * FROM sandboxes WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at',
    );
  }

  insert(row: NewSandboxRow): Promise<void> {
    return resolved(() => {
      this.#db.transaction(() => {
        this.#insert.run(encode({ owner_pid: null, owner_start: null, owner_instance: null, ...row }));
        for (const [key, value] of Object.entries(row.labels)) this.#insertLabel.run(row.id, key, value);
      })();
    });
  }

  find(id: string): Promise<SandboxRow | undefined> {
    return resolved(() => {
      return this.#find(id);
    });
  }

  get(id: string): Promise<SandboxRow> {
    return resolved(() => {
      return this.#getRow(id);
    });
  }

  update(id: string, patch: SandboxPatch): Promise<void> {
    return resolved(() => {
      this.#update(id, patch);
    });
  }

  /** An IMMEDIATE transaction: no other process can change the row between the read and the write. */
  updateLocked(id: string, decide: (row: SandboxRow) => SandboxPatch | undefined): Promise<SandboxRow> {
    return resolved(() => {
      return this.#db
        .transaction(() => {
          const row = this.#getRow(id);
          const patch = decide(row);
          if (patch !== undefined) this.#update(id, patch);
          return row;
        })
        .immediate();
    });
  }

  removeLabel(id: string, key: string): Promise<boolean> {
    return resolved(() => {
      return this.#db
        .transaction(() => {
          const row = this.#getRow(id);
          if (!Object.hasOwn(row.labels, key)) return false;
          const labels = Object.fromEntries(Object.entries(row.labels).filter(([k]) => k !== key));
          this.#update(id, { labels });
          this.#db.prepare('DELETE FROM sandbox_labels WHERE sandbox_id = ? AND key = ?').run(id, key);
          return true;
        })
        .immediate();
    });
  }

  codebasesWithLabel(key: string): Promise<string[]> {
    return resolved(() => {
      return this.#db
        .prepare<[string], { codebase_id: string }>(
          `SELECT DISTINCT s.codebase_id FROM sandboxes s
             JOIN sandbox_labels l ON l.sandbox_id = s.id WHERE l.key = ?`,
        )
        .all(key)
        .map((r) => r.codebase_id);
    });
  }

  delete(id: string): Promise<void> {
    return resolved(() => {
      this.#delete.run(id);
    });
  }

  countByCodebase(codebaseId: string): Promise<number> {
    return resolved(() => {
      return this.#byCodebase.get(codebaseId)?.n ?? 0;
    });
  }

  all(): Promise<SandboxRow[]> {
    return resolved(() => {
      return this.#all.all().map(decode);
    });
  }

  expired(now: number): Promise<SandboxRow[]> {
    return resolved(() => {
      return this.#expired.all(now).map(decode);
    });
  }

  query(q: SandboxQuery): Promise<SandboxRow[]> {
    return resolved(() => {
      const where: string[] = [];
      const params: unknown[] = [];
      if (q.codebaseId !== undefined) {
        where.push('s.codebase_id = ?');
        params.push(q.codebaseId);
      }
      if (q.state !== undefined) {
        where.push('s.state = ?');
        params.push(q.state);
      }
      for (const [key, value] of Object.entries(q.labels ?? {})) {
        where.push(
          'EXISTS (SELECT 1 FROM sandbox_labels l WHERE l.sandbox_id = s.id AND l.key = ? AND l.value = ?)',
        );
        params.push(key, value);
      }
      if (q.codebaseVisibility !== undefined) {
        where.push('s.codebase_id IN (SELECT c.id FROM codebases c WHERE c.visibility = ?)');
        params.push(q.codebaseVisibility);
      }
      for (const key of q.withoutLabelKeys ?? []) {
        where.push('NOT EXISTS (SELECT 1 FROM sandbox_labels l WHERE l.sandbox_id = s.id AND l.key = ?)');
        params.push(key);
      }
      if (q.after !== undefined) {
        where.push('(s.created_at > ? OR (s.created_at = ? AND s.id > ?))');
        params.push(q.after.createdAt, q.after.createdAt, q.after.id);
      }
      const sql = `SELECT s.* FROM sandboxes s ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY s.created_at, s.id LIMIT ?`;
      return this.#db
        .prepare<unknown[], StoredRow>(sql)
        .all(...params, q.limit)
        .map(decode);
    });
  }

  #find(id: string): SandboxRow | undefined {
    const row = this.#get.get(id);
    return row === undefined ? undefined : decode(row);
  }

  #getRow(id: string): SandboxRow {
    const row = this.#find(id);
    if (row === undefined) throw new NotFoundError(`sandbox ${id} not found`, { details: { id } });
    return row;
  }

  #update(id: string, patch: SandboxPatch): void {
    const keys = Object.keys(patch).filter((k) => (patch as Record<string, unknown>)[k] !== undefined);
    for (const key of keys) if (!PATCHABLE.has(key)) throw new Error(`not a patchable column: ${key}`);
    const sets = [
      ...keys.flatMap((k) =>
        k === 'network' ? ['network = @network', 'network_policy = @network_policy'] : [`${k} = @${k}`],
      ),
      'updated_at = @updated_at',
    ];
    // Column names come from PATCHABLE only; values are bound parameters.
    this.#db.prepare(`UPDATE sandboxes SET ${sets.join(', ')} WHERE id = @id`).run({
      ...encode(patch),
      id,
      updated_at: Date.now(),
    });
  }
}
