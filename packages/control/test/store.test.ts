// The metadata database without any process or mount: migrations, rows, label filters, keyset pagination.
import { NETWORK_NONE } from '@agentfense/network';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidArgumentError, NotFoundError, UnavailableError } from '@agentfense/protocol';
import { newId } from '../src/index.js';
import { MIGRATIONS, openDatabase, schemaVersion } from '../src/store/db.js';
import type { Db } from '../src/store/db.js';
import { decodePageToken, encodePageToken, pageSize } from '../src/store/pagination.js';
import { SandboxStore, sandboxInfo } from '../src/store/sandboxes.js';
import { CodebaseStore } from '../src/store/codebases.js';

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

  function seed(count: number): { store: SandboxStore; ids: string[] } {
    const codebases = new CodebaseStore(db);
    const store = new SandboxStore(db);
    const cb = newId('codebase');
    codebases.insert({
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
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const id = newId('sandbox');
      ids.push(id);
      const labels = { parity: i % 2 === 0 ? 'even' : 'odd', i: String(i) };
      store.insert({
        id,
        codebase_id: cb,
        image: null,
        state: i === 0 ? 'RUNNING' : 'PENDING',
        state_reason: null,
        runtime: 'bwrap',
        rules: [],
        network: NETWORK_NONE,
        resources: {},
        env: { SECRET: 'x' },
        audit_allowed: false,
        labels,
        expires_at: i === 1 ? 5 : null,
        // Equal creation times for some rows: the id breaks ties, so pages never skip or repeat.
        created_at: 100 + Math.floor(i / 2),
        updated_at: 100,
        secrets: [],
      });
    }
    return { store, ids };
  }

  it('pages through rows in (created_at, id) order without skipping or repeating', () => {
    const { store, ids } = seed(7);
    const expected = [...ids].sort((a, b) => {
      const ca = 100 + Math.floor(ids.indexOf(a) / 2);
      const cb = 100 + Math.floor(ids.indexOf(b) / 2);
      return ca - cb || (a < b ? -1 : 1);
    });
    const seen: string[] = [];
    let after: { createdAt: number; id: string } | undefined;
    for (;;) {
      const rows = store.query({ after, limit: 3 });
      if (rows.length === 0) break;
      seen.push(...rows.map((r) => r.id));
      const last = rows.at(-1)!;
      after = { createdAt: last.created_at, id: last.id };
    }
    expect(seen).toEqual(expected);
  });

  it('filters by labels (all must match) and state', () => {
    const { store, ids } = seed(6);
    expect(
      store
        .query({ labels: { parity: 'even' }, limit: 10 })
        .map((r) => r.id)
        .sort(),
    ).toEqual([ids[0], ids[2], ids[4]].sort());
    expect(store.query({ labels: { parity: 'even', i: '2' }, limit: 10 }).map((r) => r.id)).toEqual([ids[2]]);
    expect(store.query({ labels: { parity: 'even', i: '3' }, limit: 10 })).toEqual([]);
    expect(store.query({ state: 'RUNNING', limit: 10 }).map((r) => r.id)).toEqual([ids[0]]);
    expect(store.expired(10).map((r) => r.id)).toEqual([ids[1]]);
  });

  it('updates rows, cascades labels on delete, and never reports env', () => {
    const { store, ids } = seed(1);
    const id = ids[0]!;
    store.update(id, { state: 'STOPPED', state_reason: 'because', restart_count: 2 });
    const info = sandboxInfo(store.get(id));
    expect(info).toMatchObject({
      state: 'STOPPED',
      stateReason: 'because',
      restartCount: 2,
      labels: { parity: 'even', i: '0' },
    });
    expect(JSON.stringify(info)).not.toContain('SECRET');
    // JSON and flag columns come back typed, and a patch of them is stored the same way.
    expect(store.get(id)).toMatchObject({
      rules: [],
      network: NETWORK_NONE,
      env: { SECRET: 'x' },
      limits: null,
    });
    const limits = { memoryBytes: 1, cpuQuota: null, cpuShares: null, pidsLimit: 2, mechanism: 'none' };
    const rules = [{ pattern: '**', permission: 'read' as const }];
    const network = { mode: 'allow' as const, rules: [{ action: 'allow' as const, host: 'example.com' }] };
    store.update(id, { limits, rules, network, audit_allowed: true });
    expect(store.get(id)).toMatchObject({ limits, rules, network, audit_allowed: true });
    expect(db.prepare('SELECT network, network_policy, rules FROM sandboxes WHERE id = ?').get(id)).toEqual({
      network: 1,
      network_policy: JSON.stringify(network),
      rules: JSON.stringify(rules),
    });
    expect(() => store.update(id, { id: 'x' } as never)).toThrow(/patchable/);
    store.delete(id);
    expect(() => store.get(id)).toThrow(NotFoundError);
    expect((db.prepare('SELECT COUNT(*) AS n FROM sandbox_labels').get() as { n: number }).n).toBe(0);
  });
});
