// The control plane's SQLite metadata database, opened by tests that read (or, for an attack, alter)
// its records directly, with the control package's own driver: the test package has none of its own.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface RecordsDb {
  prepare(sql: string): { all(...args: unknown[]): unknown[]; run(...args: unknown[]): unknown };
  close(): void;
}

const Database = createRequire(fileURLToPath(import.meta.resolve('@agentfense/control/package.json')))(
  'better-sqlite3',
) as new (file: string, options?: { readonly?: boolean }) => RecordsDb;

/** Opens `<dataDir>/agentfense.db`; read-only unless `writable` (the caller closes it). */
export function openRecordsDb(dataDir: string, options: { readonly writable?: boolean } = {}): RecordsDb {
  return new Database(join(dataDir, 'agentfense.db'), { readonly: options.writable !== true });
}
