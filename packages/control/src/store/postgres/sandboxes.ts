// Sandbox records in PostgreSQL. Writes that read first (claiming ownership, removing a label) hold the
// row with SELECT … FOR UPDATE in their transaction: a second replica's claim waits for the first to
// commit and then reads the owner it wrote, so two replicas never both take a sandbox.
import type pg from 'pg';
import { NotFoundError } from '@agentfense/protocol';
import { PATCHABLE, decode, encode } from '../sandbox-rows.js';
import type { NewSandboxRow, SandboxPatch, SandboxRow, StoredRow } from '../sandbox-rows.js';
import type { SandboxQuery, SandboxStore } from '../sandboxes.js';
import { inTransaction } from './migrations.js';

/** Columns of an INSERT, in order (the codec's names). */
const INSERT_COLUMNS = [
  'id',
  'codebase_id',
  'state',
  'state_reason',
  'runtime',
  'image',
  'rules',
  'network',
  'network_policy',
  'resources',
  'env',
  'audit_allowed',
  'labels',
  'expires_at',
  'created_at',
  'updated_at',
  'owner_pid',
  'owner_start',
  'owner_instance',
  'secrets',
] as const;

type Queryable = Pick<pg.PoolClient, 'query'>;

function notFound(id: string): NotFoundError {
  return new NotFoundError(`sandbox ${id} not found`, { details: { id } });
}

export class PostgresSandboxStore implements SandboxStore {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async insert(row: NewSandboxRow): Promise<void> {
    const values = encode({ owner_pid: null, owner_start: null, owner_instance: null, ...row });
    const params = INSERT_COLUMNS.map((c) => values[c] ?? null);
    await inTransaction(this.#pool, async (client) => {
      await client.query(
        `INSERT INTO sandboxes (${INSERT_COLUMNS.join(', ')})
         VALUES (${INSERT_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`,
        params,
      );
      for (const [key, value] of Object.entries(row.labels)) {
        await client.query('INSERT INTO sandbox_labels (sandbox_id, key, value) VALUES ($1, $2, $3)', [
          row.id,
          key,
          value,
        ]);
      }
    });
  }

  async find(id: string): Promise<SandboxRow | undefined> {
    const { rows } = await this.#pool.query<StoredRow>('SELECT * FROM sandboxes WHERE id = $1', [id]);
    return rows[0] === undefined ? undefined : decode(rows[0]);
  }

  async get(id: string): Promise<SandboxRow> {
    const row = await this.find(id);
    if (row === undefined) throw notFound(id);
    return row;
  }

  async update(id: string, patch: SandboxPatch): Promise<void> {
    await updateRow(this.#pool, id, patch);
  }

  async updateLocked(id: string, decide: (row: SandboxRow) => SandboxPatch | undefined): Promise<SandboxRow> {
    return inTransaction(this.#pool, async (client) => {
      const row = await lockRow(client, id);
      const patch = decide(row);
      if (patch !== undefined) await updateRow(client, id, patch);
      return row;
    });
  }

  async removeLabel(id: string, key: string): Promise<boolean> {
    return inTransaction(this.#pool, async (client) => {
      const row = await lockRow(client, id);
      if (!Object.hasOwn(row.labels, key)) return false;
      const labels = Object.fromEntries(Object.entries(row.labels).filter(([k]) => k !== key));
      await updateRow(client, id, { labels });
      await client.query('DELETE FROM sandbox_labels WHERE sandbox_id = $1 AND key = $2', [id, key]);
      return true;
    });
  }

  async codebasesWithLabel(key: string): Promise<string[]> {
    const { rows } = await this.#pool.query<{ codebase_id: string }>(
      `SELECT DISTINCT s.codebase_id FROM sandboxes s
         JOIN sandbox_labels l ON l.sandbox_id = s.id WHERE l.key = $1`,
      [key],
    );
    return rows.map((r) => r.codebase_id);
  }

  async delete(id: string): Promise<void> {
    await this.#pool.query('DELETE FROM sandboxes WHERE id = $1', [id]);
  }

  async countByCodebase(codebaseId: string): Promise<number> {
    const { rows } = await this.#pool.query<{ n: number }>(
      'SELECT COUNT(*) AS n FROM sandboxes WHERE codebase_id = $1',
      [codebaseId],
    );
    return rows[0]?.n ?? 0;
  }

  async all(): Promise<SandboxRow[]> {
    const { rows } = await this.#pool.query<StoredRow>('SELECT * FROM sandboxes ORDER BY created_at, id');
    return rows.map(decode);
  }

  async expired(now: number): Promise<SandboxRow[]> {
    const { rows } = await this.#pool.query<StoredRow>(
      'SELECT * FROM sandboxes WHERE expires_at IS NOT NULL AND expires_at <= $1 ORDER BY expires_at',
      [now],
    );
    return rows.map(decode);
  }

  async query(q: SandboxQuery): Promise<SandboxRow[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    const p = (value: unknown): string => {
      params.push(value);
      return `$${params.length}`;
    };
    if (q.codebaseId !== undefined) where.push(`s.codebase_id = ${p(q.codebaseId)}`);
    if (q.state !== undefined) where.push(`s.state = ${p(q.state)}`);
    for (const [key, value] of Object.entries(q.labels ?? {})) {
      where.push(
        `EXISTS (SELECT 1 FROM sandbox_labels l WHERE l.sandbox_id = s.id AND l.key = ${p(key)} AND l.value = ${p(value)})`,
      );
    }
    if (q.codebaseVisibility !== undefined) {
      where.push(
        `s.codebase_id IN (SELECT c.id FROM codebases c WHERE c.visibility = ${p(q.codebaseVisibility)})`,
      );
    }
    for (const key of q.withoutLabelKeys ?? []) {
      where.push(
        `NOT EXISTS (SELECT 1 FROM sandbox_labels l WHERE l.sandbox_id = s.id AND l.key = ${p(key)})`,
      );
    }
    if (q.after !== undefined) {
      const at = p(q.after.createdAt);
      where.push(`(s.created_at > ${at} OR (s.created_at = ${at} AND s.id > ${p(q.after.id)}))`);
    }
    const sql = `SELECT s.* FROM sandboxes s ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY s.created_at, s.id LIMIT ${p(q.limit)}`;
    const { rows } = await this.#pool.query<StoredRow>(sql, params);
    return rows.map(decode);
  }
}

/** The row, held against other transactions until this one ends. */
async function lockRow(client: Queryable, id: string): Promise<SandboxRow> {
  const { rows } = await client.query<StoredRow>('SELECT * FROM sandboxes WHERE id = $1 FOR UPDATE', [id]);
  if (rows[0] === undefined) throw notFound(id);
  return decode(rows[0]);
}

/** Updates the given columns (and updated_at); column names come from PATCHABLE only. */
async function updateRow(db: Queryable, id: string, patch: SandboxPatch): Promise<void> {
  const keys = Object.keys(patch).filter((k) => (patch as Record<string, unknown>)[k] !== undefined);
  for (const key of keys) if (!PATCHABLE.has(key)) throw new Error(`not a patchable column: ${key}`);
  const values = encode(patch);
  const params: unknown[] = [id];
  const sets: string[] = [];
  for (const column of [...Object.keys(values), 'updated_at']) {
    params.push(column === 'updated_at' ? Date.now() : values[column]);
    sets.push(`${column} = $${params.length}`);
  }
  await db.query(`UPDATE sandboxes SET ${sets.join(', ')} WHERE id = $1`, params);
}
