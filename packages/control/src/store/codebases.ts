// Codebase records: what every backend offers over the `codebases` table, and the SQLite one (prepared
// statements; PostgreSQL's is postgres/codebases.ts).
import type { Statement } from 'better-sqlite3';
import { NotFoundError } from '@agentfense/protocol';
import type { DirIdentity } from '@agentfense/protocol';
import type { CodebaseInfo, CodebaseKind, CodebaseVisibility } from '../codebases/types.js';
import type { Db } from './db.js';
import { resolved } from './resolved.js';

/** A codebase row as stored (times in ms since the epoch). */
export interface CodebaseRow {
  readonly id: string;
  readonly name: string;
  readonly owner_id: string | null;
  readonly kind: CodebaseKind;
  readonly host_path: string | null;
  /** A linked directory's (device, inode) when linked, "<dev>:<ino>"; null for older records. */
  readonly host_identity: string | null;
  readonly file_count: number | null;
  readonly size_bytes: number | null;
  readonly visibility: CodebaseVisibility;
  readonly created_at: number;
  readonly updated_at: number;
}

export interface CodebaseStore {
  insert(row: CodebaseRow): Promise<void>;
  /** The row, or undefined. */
  find(id: string): Promise<CodebaseRow | undefined>;
  /** The row; NotFoundError naming the id when there is none. */
  get(id: string): Promise<CodebaseRow>;
  list(): Promise<CodebaseRow[]>;
  delete(id: string): Promise<void>;
  /** Records a linked directory's identity on a record that has none yet (older records). */
  recordIdentity(id: string, identity: DirIdentity): Promise<void>;
  /** Adjusts the file count and total size after an upload (deltas may be negative). */
  addFiles(id: string, files: number, bytes: number): Promise<void>;
}

/** The NotFoundError of a codebase id no record has. */
export function codebaseNotFound(id: string): NotFoundError {
  return new NotFoundError(`codebase ${id} not found`, { details: { id } });
}

export class SqliteCodebaseStore implements CodebaseStore {
  readonly #insert: Statement;
  readonly #get: Statement<[string], CodebaseRow>;
  readonly #list: Statement<[], CodebaseRow>;
  readonly #delete: Statement<[string]>;
  readonly #addFile: Statement;
  readonly #setIdentity: Statement<[string | null, string]>;

  constructor(db: Db) {
    this.#insert = db.prepare(
      `INSERT INTO codebases (id, name, owner_id, kind, host_path, host_identity, file_count, size_bytes,
         visibility, created_at, updated_at)
       VALUES (@id, @name, @owner_id, @kind, @host_path, @host_identity, @file_count, @size_bytes, @visibility,
         @created_at, @updated_at)`,
    );
    this.#get = db.prepare('SELECT * FROM codebases WHERE id = ?');
    this.#list = db.prepare('SELECT * FROM codebases ORDER BY created_at, id');
    this.#delete = db.prepare('DELETE FROM codebases WHERE id = ?');
    this.#addFile = db.prepare(
      `UPDATE codebases SET file_count = file_count + @files, size_bytes = size_bytes + @bytes,
       updated_at = @now WHERE id = @id`,
    );
    this.#setIdentity = db.prepare(
      'UPDATE codebases SET host_identity = ? WHERE id = ? AND host_identity IS NULL',
    );
  }

  insert(row: CodebaseRow): Promise<void> {
    return resolved(() => void this.#insert.run(row));
  }

  find(id: string): Promise<CodebaseRow | undefined> {
    return resolved(() => this.#get.get(id));
  }

  get(id: string): Promise<CodebaseRow> {
    return resolved(() => {
      const row = this.#get.get(id);
      if (row === undefined) throw codebaseNotFound(id);
      return row;
    });
  }

  list(): Promise<CodebaseRow[]> {
    return resolved(() => this.#list.all());
  }

  delete(id: string): Promise<void> {
    return resolved(() => void this.#delete.run(id));
  }

  recordIdentity(id: string, identity: DirIdentity): Promise<void> {
    return resolved(() => void this.#setIdentity.run(formatIdentity(identity), id));
  }

  addFiles(id: string, files: number, bytes: number): Promise<void> {
    return resolved(() => void this.#addFile.run({ id, files, bytes, now: Date.now() }));
  }
}

/** "<dev>:<ino>", the stored form of a directory identity. */
export function formatIdentity(identity: DirIdentity): string {
  return `${identity.dev}:${identity.ino}`;
}

/** The identity stored on a row, or undefined when none was recorded. */
export function parseIdentity(stored: string | null): DirIdentity | undefined {
  const match = stored === null ? null : /^(\d+):(\d+)$/.exec(stored);
  return match === null ? undefined : { dev: match[1] as string, ino: match[2] as string };
}

/** The public form of a row; `path` is where its files are. */
export function codebaseInfo(row: CodebaseRow, storedPath: string): CodebaseInfo {
  return {
    id: row.id,
    name: row.name,
    ownerId: row.owner_id,
    kind: row.kind,
    path: row.kind === 'linked' ? (row.host_path ?? '') : storedPath,
    fileCount: row.file_count,
    sizeBytes: row.size_bytes,
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
  };
}
