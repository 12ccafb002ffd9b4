// Checkpoint records in PostgreSQL: a transaction's recorded writes are applied on one connection
// between BEGIN and COMMIT; a compaction's rewrite of every checkpoint row holds those rows (FOR UPDATE).
import type pg from 'pg';
import { decodeCheckpoint, readyCheckpoint, recordWrites, replacePair } from '../checkpoints.js';
import type {
  CheckpointRow,
  CheckpointStore,
  CheckpointWrite,
  CheckpointWriter,
  CompactionRow,
  LayerHolders,
  LayerRow,
  RawCheckpoint,
} from '../checkpoints.js';
import { inTransaction } from './migrations.js';

type Queryable = Pick<pg.PoolClient, 'query'>;

const CHECKPOINT_COLUMNS = 'id, sandbox_id, name, message, layers, state, created_at';

export class PostgresCheckpointStore implements CheckpointStore {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async get(sandboxId: string, id: string): Promise<CheckpointRow> {
    const { rows } = await this.#pool.query<RawCheckpoint>(
      `SELECT ${CHECKPOINT_COLUMNS} FROM checkpoints WHERE id = $1`,
      [id],
    );
    return readyCheckpoint(sandboxId, id, rows[0] === undefined ? undefined : decodeCheckpoint(rows[0]));
  }

  async list(sandboxId: string): Promise<CheckpointRow[]> {
    const { rows } = await this.#pool.query<RawCheckpoint>(
      `SELECT ${CHECKPOINT_COLUMNS} FROM checkpoints WHERE sandbox_id = $1 AND state = 'ready'
       ORDER BY created_at, seq`,
      [sandboxId],
    );
    return rows.map(decodeCheckpoint);
  }

  async pending(sandboxId: string): Promise<CheckpointRow[]> {
    const { rows } = await this.#pool.query<RawCheckpoint>(
      `SELECT ${CHECKPOINT_COLUMNS} FROM checkpoints WHERE sandbox_id = $1 AND state = 'pending'`,
      [sandboxId],
    );
    return rows.map(decodeCheckpoint);
  }

  async stack(sandboxId: string): Promise<string[]> {
    const { rows } = await this.#pool.query<{ layers: string }>(
      'SELECT layers FROM sandbox_stacks WHERE sandbox_id = $1',
      [sandboxId],
    );
    return rows[0] === undefined ? [] : (JSON.parse(rows[0].layers) as string[]);
  }

  async referencedLayers(): Promise<Set<string>> {
    const { checkpoints, stacks } = await this.holders();
    const found = new Set<string>();
    for (const layers of [...checkpoints, ...stacks.values()]) for (const id of layers) found.add(id);
    for (const row of await this.compactions()) for (const id of [row.layer, ...row.from]) found.add(id);
    return found;
  }

  async holders(): Promise<LayerHolders> {
    const checkpoints = (
      await this.#pool.query<{ layers: string }>('SELECT layers FROM checkpoints')
    ).rows.map((row) => JSON.parse(row.layers) as string[]);
    const stacks = new Map<string, string[]>();
    const { rows } = await this.#pool.query<{ sandbox_id: string; layers: string }>(
      'SELECT sandbox_id, layers FROM sandbox_stacks',
    );
    for (const row of rows) stacks.set(row.sandbox_id, JSON.parse(row.layers) as string[]);
    return { checkpoints, stacks };
  }

  async compactions(): Promise<CompactionRow[]> {
    const { rows } = await this.#pool.query<{ layer_id: string; from_layers: string; maker_id: string }>(
      'SELECT layer_id, from_layers, maker_id FROM compactions',
    );
    return rows.map((row) => ({
      layer: row.layer_id,
      from: JSON.parse(row.from_layers) as [string, string],
      maker: row.maker_id,
    }));
  }

  async addCompaction(row: CompactionRow): Promise<void> {
    await this.#pool.query('INSERT INTO compactions (layer_id, from_layers, maker_id) VALUES ($1, $2, $3)', [
      row.layer,
      JSON.stringify(row.from),
      row.maker,
    ]);
  }

  async frozenBytes(makerId: string): Promise<number> {
    const { rows } = await this.#pool.query<{ bytes: number }>(
      'SELECT COALESCE(SUM(bytes), 0)::BIGINT AS bytes FROM layers WHERE maker_id = $1',
      [makerId],
    );
    return rows[0]?.bytes ?? 0;
  }

  async layers(): Promise<LayerRow[]> {
    return (await this.#pool.query<LayerRow>('SELECT id, maker_id, bytes FROM layers')).rows;
  }

  async transaction(fn: (tx: CheckpointWriter) => void): Promise<void> {
    const writes = recordWrites(fn);
    if (writes.length === 0) return;
    await inTransaction(this.#pool, async (client) => {
      for (const w of writes) await apply(client, w);
    });
  }
}

async function apply(db: Queryable, w: CheckpointWrite): Promise<void> {
  switch (w.op) {
    case 'insert': {
      const [row] = w.args;
      await db.query(`INSERT INTO checkpoints (${CHECKPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
        row.id,
        row.sandbox_id,
        row.name,
        row.message,
        JSON.stringify(row.layers),
        row.state,
        row.created_at,
      ]);
      return;
    }
    case 'delete':
      await db.query('DELETE FROM checkpoints WHERE id = $1', [w.args[0]]);
      return;
    case 'markReady': {
      const [id, layers] = w.args;
      await db.query("UPDATE checkpoints SET state = 'ready', layers = COALESCE($1, layers) WHERE id = $2", [
        layers === undefined ? null : JSON.stringify(layers),
        id,
      ]);
      return;
    }
    case 'setStack':
      await db.query(
        `INSERT INTO sandbox_stacks (sandbox_id, layers) VALUES ($1, $2)
         ON CONFLICT (sandbox_id) DO UPDATE SET layers = excluded.layers`,
        [w.args[0], JSON.stringify(w.args[1])],
      );
      return;
    case 'addLayer':
      await db.query(
        `INSERT INTO layers (id, maker_id, bytes) VALUES ($1, $2, $3)
         ON CONFLICT (id) DO UPDATE SET bytes = COALESCE(excluded.bytes, layers.bytes)`,
        [...w.args],
      );
      return;
    case 'setLayerBytes':
      await db.query('UPDATE layers SET bytes = $1 WHERE id = $2', [w.args[1], w.args[0]]);
      return;
    case 'dropLayer':
      await db.query('DELETE FROM layers WHERE id = $1', [w.args[0]]);
      return;
    case 'replaceInCheckpoints': {
      const [from, layer] = w.args;
      const { rows } = await db.query<{ id: string; layers: string }>(
        'SELECT id, layers FROM checkpoints FOR UPDATE',
      );
      for (const row of rows) {
        const layers = JSON.parse(row.layers) as string[];
        const replaced = replacePair(layers, from, layer);
        if (replaced !== layers) {
          await db.query('UPDATE checkpoints SET layers = $1 WHERE id = $2', [
            JSON.stringify(replaced),
            row.id,
          ]);
        }
      }
      return;
    }
    case 'dropCompaction':
      await db.query('DELETE FROM compactions WHERE layer_id = $1', [w.args[0]]);
      return;
  }
}
