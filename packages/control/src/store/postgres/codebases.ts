// Codebase records in PostgreSQL (the same queries as SQLite's, with positional parameters).
import type pg from 'pg';
import type { DirIdentity } from '@agentfense/protocol';
import { codebaseNotFound, formatIdentity } from '../codebases.js';
import type { CodebaseRow, CodebaseStore } from '../codebases.js';

const COLUMNS = [
  'id',
  'name',
  'owner_id',
  'kind',
  'host_path',
  'host_identity',
  'file_count',
  'size_bytes',
  'visibility',
  'created_at',
  'updated_at',
] as const;

export class PostgresCodebaseStore implements CodebaseStore {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async insert(row: CodebaseRow): Promise<void> {
    await this.#pool.query(
      `INSERT INTO codebases (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`,
      COLUMNS.map((c) => row[c]),
    );
  }

  async find(id: string): Promise<CodebaseRow | undefined> {
    const { rows } = await this.#pool.query<CodebaseRow>('SELECT * FROM codebases WHERE id = $1', [id]);
    return rows[0];
  }

  async get(id: string): Promise<CodebaseRow> {
    const row = await this.find(id);
    if (row === undefined) throw codebaseNotFound(id);
    return row;
  }

  async list(): Promise<CodebaseRow[]> {
    return (await this.#pool.query<CodebaseRow>('SELECT * FROM codebases ORDER BY created_at, id')).rows;
  }

  async delete(id: string): Promise<void> {
    await this.#pool.query('DELETE FROM codebases WHERE id = $1', [id]);
  }

  async recordIdentity(id: string, identity: DirIdentity): Promise<void> {
    await this.#pool.query(
      'UPDATE codebases SET host_identity = $1 WHERE id = $2 AND host_identity IS NULL',
      [formatIdentity(identity), id],
    );
  }

  /** One UPDATE that adds to the counts: two replicas' uploads into one codebase both count. */
  async addFiles(id: string, files: number, bytes: number): Promise<void> {
    await this.#pool.query(
      `UPDATE codebases SET file_count = file_count + $1, size_bytes = size_bytes + $2, updated_at = $3
       WHERE id = $4`,
      [files, bytes, Date.now(), id],
    );
  }
}
