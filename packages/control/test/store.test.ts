// The SQLite metadata database without any process or mount: page tokens, WAL, migrations, the column
// encoding. What every backend must do alike is test/control/store-contract.test.ts.
import { NETWORK_NONE } from '@agentfense/network';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidArgumentError, UnavailableError } from '@agentfense/protocol';
import { newId } from '../src/index.js';
import { MIGRATIONS, openDatabase, schemaVersion } from '../src/store/db.js';
import type { Db } from '../src/store/db.js';
import { decodePageToken, encodePageToken, pageSize } from '../src/store/pagination.js';
import { SqliteCodebaseStore } from '../src/store/codebases.js';
import { SqliteSandboxStore } from '../src/store/sqlite-sandboxes.js';

describe('page tokens', () => {
  it('round-trips a cursor and refuses anything else', () => {
    const cursor = { createdAt: 1_700_000_000_000, id: newId('sandbox') };
    expect(decodePageToken(encodePageToken(cursor))).toEqual(cursor);
    for (const bad of [
      '',
      'garbage',
      Buffer.from('[1]').toString('base64url'),
      Buffer.from('["x","y"]').toString('base64url'),
    ]) {
      expect(() => decodePageToken(bad)).toThrow(InvalidArgumentError);
    }
  });

  it('checks page sizes', () => {
    expect(pageSize(undefined)).toBe(100);
    expect(pageSize(1)).toBe(1);
    expect(pageSize(1000)).toBe(1000);
    for (const bad of [0, -1, 1001, 1.5, Number.NaN])
      expect(() => pageSize(bad)).toThrow(InvalidArgumentError);
  });
});

describe('metadata database', () => {
  let dir: string;
  let db: Db;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'af-store-'));
    db = openDatabase(join(dir, 'agentfense.db'));
  });
  afterEach(async () => {
    db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('is in WAL mode at the latest schema version, and reopening applies nothing twice', () => {
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(schemaVersion(db)).toBe(MIGRATIONS.at(-1)?.version);
    db.close();
    db = openDatabase(join(dir, 'agentfense.db'));
    expect((db.prepare('SELECT COUNT(*) AS n FROM schema_migrations').get() as { n: number }).n).toBe(
      MIGRATIONS.length,
    );
  });

  it('upgrades a database made by an older release, keeping its rows', async () => {
    db.close();
    const file = join(dir, 'old.db');
    const { default: Database } = await import('better-sqlite3');
    const old = new Database(file);
    old.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)');
    old.exec(MIGRATIONS[0]!.sql);
    old.prepare('INSERT INTO schema_migrations VALUES (1, 0)').run();
    const insert = old.prepare(
      "INSERT INTO codebases (id, name, kind, host_path, created_at, updated_at) VALUES (?, 'c', ?, ?, 0, 0)",
    );
    insert.run('cb_stored', 'stored', null);
    insert.run('cb_linked', 'linked', '/home/user/repo');
    old.close();
    db = openDatabase(file);
    expect(schemaVersion(db)).toBe(MIGRATIONS.at(-1)?.version);
    const columns = db.prepare('PRAGMA table_info(sandboxes)').all() as { name: string }[];
    expect(columns.map((c) => c.name)).toContain('limits');
    // Every directory linked so far was linked by a local process: it stays out of the API's reach.
    const reach = db.prepare('SELECT id, visibility FROM codebases ORDER BY id').all();
    expect(reach).toEqual([
      { id: 'cb_linked', visibility: 'local' },
      { id: 'cb_stored', visibility: 'api' },
    ]);
  });

  it('refuses a database from a newer release', () => {
    db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(999, Date.now());
    db.close();
    expect(() => openDatabase(join(dir, 'agentfense.db'))).toThrow(UnavailableError);
    db = openDatabase(':memory:');
  });

  it('stores JSON columns as text and flags as 0/1 (the codec both backends share)', async () => {
    const codebases = new SqliteCodebaseStore(db);
    const store = new SqliteSandboxStore(db);
    const cb = newId('codebase');
    await codebases.insert({
      id: cb,
      name: 'c',
      owner_id: null,
      kind: 'stored',
      host_path: null,
      host_identity: null,
      file_count: 0,
      size_bytes: 0,
      visibility: 'api',
      created_at: 1,
      updated_at: 1,
    });
    const id = newId('sandbox');
    await store.insert({
      id,
      codebase_id: cb,
      image: null,
      state: 'PENDING',
      state_reason: null,
      runtime: 'bwrap',
      rules: [],
      network: NETWORK_NONE,
      resources: {},
      env: {},
      audit_allowed: false,
      labels: {},
      expires_at: null,
      created_at: 1,
      updated_at: 1,
      secrets: [],
    });
    const rules = [{ pattern: '**', permission: 'read' as const }];
    const network = { mode: 'allow' as const, rules: [{ action: 'allow' as const, host: 'example.com' }] };
    await store.update(id, { rules, network, audit_allowed: true });
    expect(
      db.prepare('SELECT network, network_policy, rules, audit_allowed FROM sandboxes WHERE id = ?').get(id),
    ).toEqual({
      network: 1,
      network_policy: JSON.stringify(network),
      rules: JSON.stringify(rules),
      audit_allowed: 1,
    });
  });
});
