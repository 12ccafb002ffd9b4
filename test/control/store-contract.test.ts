// The metadata store's contract, run alike against SQLite (the embedded default) and PostgreSQL (a private
// cluster, test/helpers/postgres.ts): rows, label filters, keyset pages, typed columns, the row lock that
// decides ownership between processes or replicas, checkpoint transactions, and PostgreSQL's errors.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { NETWORK_NONE } from '@agentfense/network';
import { AgentFenseError, NotFoundError, WrongStateError } from '@agentfense/protocol';
import { newId } from '../../packages/control/src/ids.js';
import { openMetadataStore } from '../../packages/control/src/store/metadata.js';
import type { MetadataStore } from '../../packages/control/src/store/metadata.js';
import { sandboxInfo } from '../../packages/control/src/store/sandboxes.js';
import { startPostgres } from '../helpers/postgres.js';
import type { PostgresCluster } from '../helpers/postgres.js';

let cluster: PostgresCluster | undefined;
beforeAll(async () => {
  cluster = await startPostgres();
});
afterAll(async () => {
  await cluster?.stop();
});

/** Empties every table (PostgreSQL keeps its database between cases; SQLite gets a new file). */
async function emptied(store: MetadataStore): Promise<MetadataStore> {
  for (const row of await store.sandboxes.all()) await store.sandboxes.delete(row.id);
  for (const row of await store.codebases.list()) await store.codebases.delete(row.id);
  await store.checkpoints.transaction((tx) => {
    void tx;
  });
  return store;
}

describe.each(['sqlite', 'postgres'] as const)('metadata store contract: %s', (backend) => {
  let dir: string;
  let store: MetadataStore;
  const open = (): Promise<MetadataStore> =>
    openMetadataStore({
      sqliteFile: join(dir, 'agentfense.db'),
      ...(backend === 'postgres' ? { database: cluster?.url } : {}),
    });

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'af-store-contract-'));
    store = await emptied(await open());
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function seed(count: number): Promise<{ codebase: string; ids: string[] }> {
    const codebase = newId('codebase');
    await store.codebases.insert({
      id: codebase,
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
      await store.sandboxes.insert({
        id,
        codebase_id: codebase,
        image: null,
        state: i === 0 ? 'RUNNING' : 'PENDING',
        state_reason: null,
        runtime: 'bwrap',
        rules: [],
        network: NETWORK_NONE,
        resources: {},
        env: { SECRET: 'x' },
        audit_allowed: false,
        labels: { parity: i % 2 === 0 ? 'even' : 'odd', i: String(i) },
        expires_at: i === 1 ? 5 : null,
        // Equal creation times for some rows (ms since the epoch, past 2^31): the id breaks ties.
        created_at: 1_700_000_000_000 + Math.floor(i / 2),
        updated_at: 1_700_000_000_000,
        secrets: [],
      });
    }
    return { codebase, ids };
  }

  it('pages through rows in (created_at, id) order without skipping or repeating', async () => {
    const { ids } = await seed(7);
    const created = (id: string): number => Math.floor(ids.indexOf(id) / 2);
    const expected = [...ids].sort((a, b) => created(a) - created(b) || (a < b ? -1 : 1));
    const seen: string[] = [];
    let after: { createdAt: number; id: string } | undefined;
    for (;;) {
      const rows = await store.sandboxes.query({ after, limit: 3 });
      if (rows.length === 0) break;
      seen.push(...rows.map((r) => r.id));
      const last = rows.at(-1)!;
      after = { createdAt: last.created_at, id: last.id };
    }
    expect(seen).toEqual(expected);
    expect((await store.sandboxes.all()).map((r) => r.id)).toEqual(expected);
  });

  it('filters by labels (all must match), missing labels, state, codebase visibility and expiry', async () => {
    const { codebase, ids } = await seed(6);
    const q = async (query: Parameters<MetadataStore['sandboxes']['query']>[0]) =>
      (await store.sandboxes.query(query)).map((r) => r.id).sort();
    expect(await q({ labels: { parity: 'even' }, limit: 10 })).toEqual([ids[0], ids[2], ids[4]].sort());
    expect(await q({ labels: { parity: 'even', i: '2' }, limit: 10 })).toEqual([ids[2]]);
    expect(await q({ labels: { parity: 'even', i: '3' }, limit: 10 })).toEqual([]);
    expect(await q({ withoutLabelKeys: ['parity'], limit: 10 })).toEqual([]);
    expect(await q({ state: 'RUNNING', codebaseId: codebase, limit: 10 })).toEqual([ids[0]]);
    expect(await q({ codebaseVisibility: 'local', limit: 10 })).toEqual([]);
    expect((await store.sandboxes.expired(10)).map((r) => r.id)).toEqual([ids[1]]);
    expect(await store.sandboxes.countByCodebase(codebase)).toBe(6);
    expect(await store.sandboxes.codebasesWithLabel('parity')).toEqual([codebase]);
  });

  it('updates typed columns, removes a label from both places, cascades on delete, never reports env', async () => {
    const { ids } = await seed(1);
    const id = ids[0]!;
    await store.sandboxes.update(id, { state: 'STOPPED', state_reason: 'because', restart_count: 2 });
    const info = sandboxInfo(await store.sandboxes.get(id));
    expect(info).toMatchObject({ state: 'STOPPED', stateReason: 'because', restartCount: 2 });
    expect(JSON.stringify(info)).not.toContain('SECRET');
    const limits = { memoryBytes: 1, cpuQuota: null, cpuShares: null, pidsLimit: 2, mechanism: 'none' };
    const rules = [{ pattern: '**', permission: 'read' as const }];
    const network = { mode: 'allow' as const, rules: [{ action: 'allow' as const, host: 'example.com' }] };
    expect((await store.sandboxes.get(id)).snapshot_id).toBeNull();
    const snapshot_id = 'a'.repeat(64);
    await store.sandboxes.update(id, {
      limits,
      rules,
      network,
      audit_allowed: true,
      started_at: 2 ** 41,
      snapshot_id,
    });
    expect(await store.sandboxes.get(id)).toMatchObject({
      limits,
      rules,
      network,
      audit_allowed: true,
      started_at: 2 ** 41,
      env: { SECRET: 'x' },
      snapshot_id,
    });
    await expect(store.sandboxes.update(id, { id: 'x' } as never)).rejects.toThrow(/patchable/);
    expect(await store.sandboxes.removeLabel(id, 'parity')).toBe(true);
    expect(await store.sandboxes.removeLabel(id, 'parity')).toBe(false);
    expect((await store.sandboxes.get(id)).labels).toEqual({ i: '0' });
    expect(await store.sandboxes.query({ labels: { parity: 'even' }, limit: 10 })).toEqual([]);
    await store.sandboxes.delete(id);
    await expect(store.sandboxes.get(id)).rejects.toThrow(NotFoundError);
    expect(await store.sandboxes.find(id)).toBeUndefined();
    expect(await store.sandboxes.codebasesWithLabel('i')).toEqual([]);
  });

  it('a locked update reads and writes as one: of two claims at once exactly one wins', async () => {
    const { ids } = await seed(1);
    const id = ids[0]!;
    // Two connections (SQLite: two handles on the file; PostgreSQL: two pools), as two replicas have.
    const other = await open();
    try {
      const claim = (s: MetadataStore, who: string) =>
        s.sandboxes.updateLocked(id, (row) => {
          if (row.owner_instance !== null) throw new WrongStateError(`taken by ${row.owner_instance}`);
          return { owner_pid: 1, owner_start: '1', owner_instance: who };
        });
      const results = await Promise.allSettled([claim(store, 'a'), claim(other, 'b'), claim(store, 'c')]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(WrongStateError);
      const winner = (await store.sandboxes.get(id)).owner_instance;
      expect(['a', 'b', 'c']).toContain(winner);
      // What the decision read is returned; a decision that throws leaves the row as it was.
      const read = await other.sandboxes.updateLocked(id, () => undefined);
      expect(read.owner_instance).toBe(winner);
    } finally {
      await other.close();
    }
  });

  it('a warm placement is claimed once: of replicas racing exactly one wins, and none after release', async () => {
    const placement = newId('sandbox');
    const [a, b, c] = [newId('sandbox'), newId('sandbox'), newId('sandbox')];
    const other = await open();
    try {
      const at = Date.now();
      const won = await Promise.all([
        store.warmClaims.claim({ placementId: placement, sandboxId: a, at }),
        other.warmClaims.claim({ placementId: placement, sandboxId: b, at }),
        store.warmClaims.claim({ placementId: placement, sandboxId: c, at }),
      ]);
      expect(won.filter(Boolean)).toHaveLength(1);
      const winner = [a, b, c][won.indexOf(true)]!;
      // Both replicas route the sandbox to it, and the placement back to the sandbox.
      expect(await other.warmClaims.placementOf(winner)).toBe(placement);
      expect(await store.warmClaims.sandboxOf(placement)).toBe(winner);
      for (const loser of [a, b, c].filter((id) => id !== winner))
        expect(await store.warmClaims.placementOf(loser)).toBeUndefined();
      // Its sandbox stopped: the claim routes nothing any more, and the placement is never claimed again.
      await store.warmClaims.release(winner, at + 1);
      expect(await other.warmClaims.placementOf(winner)).toBeUndefined();
      expect(await store.warmClaims.sandboxOf(placement)).toBeUndefined();
      expect(await other.warmClaims.claim({ placementId: placement, sandboxId: a, at: at + 2 })).toBe(false);
      // When it was claimed stays known, released or not; a placement never claimed has no time.
      expect(await other.warmClaims.claimedAt(placement)).toBe(at);
      expect(await store.warmClaims.claimedAt(newId('sandbox'))).toBeUndefined();
    } finally {
      await other.close();
    }
  });

  it('a claim that never finished is released by its placement, and its placement never claimed again', async () => {
    const placement = newId('sandbox');
    const sandbox = newId('sandbox');
    const at = Date.now();
    expect(await store.warmClaims.claim({ placementId: placement, sandboxId: sandbox, at })).toBe(true);
    await store.warmClaims.releasePlacement(placement, at + 1);
    expect(await store.warmClaims.sandboxOf(placement)).toBeUndefined();
    expect(await store.warmClaims.placementOf(sandbox)).toBeUndefined();
    expect(await store.warmClaims.claim({ placementId: placement, sandboxId: newId('sandbox'), at })).toBe(
      false,
    );
  });

  it('codebases: rows, counts added in place, an identity recorded once', async () => {
    const { codebase } = await seed(0);
    await store.codebases.addFiles(codebase, 2, 10);
    await store.codebases.addFiles(codebase, -1, -4);
    await store.codebases.recordIdentity(codebase, { dev: '1', ino: '2' });
    await store.codebases.recordIdentity(codebase, { dev: '3', ino: '4' });
    expect(await store.codebases.get(codebase)).toMatchObject({
      file_count: 1,
      size_bytes: 6,
      host_identity: '1:2',
    });
    expect((await store.codebases.list()).map((c) => c.id)).toEqual([codebase]);
    await store.codebases.delete(codebase);
    await expect(store.codebases.get(codebase)).rejects.toThrow(NotFoundError);
  });

  it('checkpoints: a transaction applies all its writes or none, stacks, layers, charges and compactions', async () => {
    const { ids } = await seed(1);
    const id = ids[0]!;
    const cp = (n: number, layers: string[]) => ({
      id: `ckpt_${n}`,
      sandbox_id: id,
      name: null,
      message: null,
      layers,
      state: 'pending' as const,
      created_at: 5,
    });
    await store.checkpoints.transaction((tx) => {
      tx.insert(cp(1, ['l1']));
      tx.addLayer('l1', id, null);
    });
    await expect(store.checkpoints.get(id, 'ckpt_1')).rejects.toThrow(NotFoundError); // pending
    expect((await store.checkpoints.pending(id)).map((c) => c.id)).toEqual(['ckpt_1']);
    await store.checkpoints.transaction((tx) => {
      tx.markReady('ckpt_1', ['l1']);
      tx.setStack(id, ['l1']);
      tx.setLayerBytes('l1', 2 ** 33);
      tx.insert(cp(2, ['l1', 'l2']));
      tx.markReady('ckpt_2');
      tx.addLayer('l2', id, 7);
    });
    // A failing write undoes the others of its transaction (a second row with the same id).
    await expect(
      store.checkpoints.transaction((tx) => {
        tx.dropLayer('l1');
        tx.insert(cp(2, []));
      }),
    ).rejects.toThrow();
    expect((await store.checkpoints.list(id)).map((c) => c.id)).toEqual(['ckpt_1', 'ckpt_2']);
    expect(await store.checkpoints.stack(id)).toEqual(['l1']);
    expect(await store.checkpoints.frozenBytes(id)).toBe(2 ** 33 + 7);
    await store.checkpoints.addCompaction({ layer: 'l3', from: ['l1', 'l2'], maker: id });
    expect([...(await store.checkpoints.referencedLayers())].sort()).toEqual(['l1', 'l2', 'l3']);
    await store.checkpoints.transaction((tx) => {
      tx.replaceInCheckpoints(['l1', 'l2'], 'l3');
      tx.dropCompaction('l3');
    });
    expect((await store.checkpoints.get(id, 'ckpt_2')).layers).toEqual(['l3']);
    expect(await store.checkpoints.compactions()).toEqual([]);
    expect((await store.checkpoints.holders()).stacks.get(id)).toEqual(['l1']);
    // The sandbox's records go with it; layers outlive their maker (a fork may stand on them).
    await store.sandboxes.delete(id);
    expect(await store.checkpoints.list(id)).toEqual([]);
    expect((await store.checkpoints.layers()).map((l) => l.id).sort()).toEqual(['l1', 'l2']);
    await store.checkpoints.transaction((tx) => ['l1', 'l2'].forEach((l) => tx.dropLayer(l)));
  });
});

describe('PostgreSQL connection errors', () => {
  const reasonOf = async (url: string): Promise<{ code: string; reason: unknown; message: string }> => {
    const err = await openMetadataStore({ sqliteFile: '/nonexistent', database: url }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AgentFenseError);
    const e = err as AgentFenseError;
    return { code: e.code, reason: e.details?.['reason'], message: e.message };
  };

  it('names what is wrong, in a closed set of reasons, never with the password', async () => {
    const url = cluster?.url ?? '';
    const password = cluster?.password ?? '';
    const wrong = url.replace(`:${password}@`, ':not-the-password@');
    const missing = url.replace(/\/agentfense$/, '/nodb');
    const gone = `postgresql://af:${password}@${encodeURIComponent(join(tmpdir(), 'af-no-such-socket'))}/agentfense`;
    const cases = [
      [`mysql://af:${password}@host/db`, 'AF_INVALID_ARGUMENT', 'invalid-url'],
      [`postgres://af:${password}@host`, 'AF_INVALID_ARGUMENT', 'invalid-url'],
      [wrong, 'AF_UNAVAILABLE', 'authentication'],
      [missing, 'AF_UNAVAILABLE', 'no-database'],
      [gone, 'AF_UNAVAILABLE', 'unreachable'],
    ] as const;
    for (const [input, code, reason] of cases) {
      const got = await reasonOf(input);
      expect(got, input).toMatchObject({ code, reason });
      expect(got.message).not.toContain(password);
      expect(got.message).not.toContain('not-the-password');
    }
  });
});
