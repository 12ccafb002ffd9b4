// Checkpoint records in SQLite: prepared statements over `checkpoints`, `sandbox_stacks`, `layers` and
// `compactions`; a transaction's recorded writes are applied in one better-sqlite3 transaction.
import type { Statement } from 'better-sqlite3';
import { decodeCheckpoint, readyCheckpoint, recordWrites, replacePair } from './checkpoints.js';
import type {
  CheckpointRow,
  CheckpointStore,
  CheckpointWrite,
  CheckpointWriter,
  CompactionRow,
  LayerHolders,
  LayerRow,
  RawCheckpoint,
} from './checkpoints.js';
import type { Db } from './db.js';
import { resolved } from './resolved.js';

function ids(rows: readonly { layers: string }[]): string[][] {
  return rows.map((row) => JSON.parse(row.layers) as string[]);
}

export class SqliteCheckpointStore implements CheckpointStore {
  readonly #db: Db;
  readonly #insert: Statement;
  readonly #get: Statement;
  readonly #bySandbox: Statement;
  readonly #pending: Statement;
  readonly #ready: Statement;
  readonly #delete: Statement;
  readonly #allLayers: Statement;
  readonly #stack: Statement;
  readonly #setStack: Statement;
  readonly #addLayer: Statement;
  readonly #layerBytes: Statement;
  readonly #dropLayer: Statement;
  readonly #madeBytes: Statement;
  readonly #layerRows: Statement;
  readonly #compactions: Statement;
  readonly #addCompaction: Statement;
  readonly #dropCompaction: Statement;
  readonly #allCheckpoints: Statement;
  readonly #setLayers: Statement;
  readonly #stackRows: Statement;

  constructor(db: Db) {
    this.#db = db;
    this.#insert = db.prepare(
      `INSERT INTO checkpoints (id, sandbox_id, name, message, layers, state, created_at)
       VALUES (@id, @sandbox_id, @name, @message, @layers, @state, @created_at)`,
    );
    this.#get = db.prepare('SELECT * FROM checkpoints WHERE id = ?');
    this.#bySandbox = db.prepare(
      "SELECT * FROM checkpoints WHERE sandbox_id = ? AND state = 'ready' ORDER BY created_at, rowid",
    );
    this.#pending = db.prepare("SELECT * FROM checkpoints WHERE sandbox_id = ? AND state = 'pending'");
    this.#ready = db.prepare(
      "UPDATE checkpoints SET state = 'ready', layers = COALESCE(?, layers) WHERE id = ?",
    );
    this.#delete = db.prepare('DELETE FROM checkpoints WHERE id = ?');
    this.#allLayers = db.prepare('SELECT layers FROM checkpoints');
    this.#stack = db.prepare('SELECT layers FROM sandbox_stacks WHERE sandbox_id = ?');
    this.#setStack = db.prepare(
      `INSERT INTO sandbox_stacks (sandbox_id, layers) VALUES (?, ?)
       ON CONFLICT (sandbox_id) DO UPDATE SET layers = excluded.layers`,
    );
    this.#addLayer = db.prepare(
      `INSERT INTO layers (id, maker_id, bytes) VALUES (?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET bytes = COALESCE(excluded.bytes, bytes)`,
    );
    this.#layerBytes = db.prepare('UPDATE layers SET bytes = ? WHERE id = ?');
    this.#dropLayer = db.prepare('DELETE FROM layers WHERE id = ?');
    this.#madeBytes = db.prepare('SELECT COALESCE(SUM(bytes), 0) AS bytes FROM layers WHERE maker_id = ?');
    this.#layerRows = db.prepare('SELECT id, maker_id, bytes FROM layers');
    this.#compactions = db.prepare('SELECT layer_id, from_layers, maker_id FROM compactions');
    this.#addCompaction = db.prepare(
      'INSERT INTO compactions (layer_id, from_layers, maker_id) VALUES (?, ?, ?)',
    );
    this.#dropCompaction = db.prepare('DELETE FROM compactions WHERE layer_id = ?');
    this.#allCheckpoints = db.prepare('SELECT id, layers FROM checkpoints');
    this.#setLayers = db.prepare('UPDATE checkpoints SET layers = ? WHERE id = ?');
    this.#stackRows = db.prepare('SELECT sandbox_id, layers FROM sandbox_stacks');
  }

  get(sandboxId: string, id: string): Promise<CheckpointRow> {
    return resolved(() => {
      const raw = this.#get.get(id) as RawCheckpoint | undefined;
      return readyCheckpoint(sandboxId, id, raw === undefined ? undefined : decodeCheckpoint(raw));
    });
  }

  list(sandboxId: string): Promise<CheckpointRow[]> {
    return resolved(() => (this.#bySandbox.all(sandboxId) as RawCheckpoint[]).map(decodeCheckpoint));
  }

  pending(sandboxId: string): Promise<CheckpointRow[]> {
    return resolved(() => (this.#pending.all(sandboxId) as RawCheckpoint[]).map(decodeCheckpoint));
  }

  stack(sandboxId: string): Promise<string[]> {
    return resolved(() => {
      const raw = this.#stack.get(sandboxId) as { layers: string } | undefined;
      return raw === undefined ? [] : (JSON.parse(raw.layers) as string[]);
    });
  }

  referencedLayers(): Promise<Set<string>> {
    return resolved(() => {
      const found = new Set<string>();
      const rows = [
        ...(this.#allLayers.all() as { layers: string }[]),
        ...(this.#stackRows.all() as { layers: string }[]),
      ];
      for (const layers of ids(rows)) for (const id of layers) found.add(id);
      for (const row of this.#compactionRows()) for (const id of [row.layer, ...row.from]) found.add(id);
      return found;
    });
  }

  holders(): Promise<LayerHolders> {
    return resolved(() => {
      const checkpoints = ids(this.#allLayers.all() as { layers: string }[]);
      const stacks = new Map<string, string[]>();
      for (const row of this.#stackRows.all() as { sandbox_id: string; layers: string }[]) {
        stacks.set(row.sandbox_id, JSON.parse(row.layers) as string[]);
      }
      return { checkpoints, stacks };
    });
  }

  compactions(): Promise<CompactionRow[]> {
    return resolved(() => this.#compactionRows());
  }

  addCompaction(row: CompactionRow): Promise<void> {
    return resolved(() => void this.#addCompaction.run(row.layer, JSON.stringify(row.from), row.maker));
  }

  frozenBytes(makerId: string): Promise<number> {
    return resolved(() => (this.#madeBytes.get(makerId) as { bytes: number }).bytes);
  }

  layers(): Promise<LayerRow[]> {
    return resolved(() => this.#layerRows.all() as LayerRow[]);
  }

  transaction(fn: (tx: CheckpointWriter) => void): Promise<void> {
    return resolved(() => {
      const writes = recordWrites(fn);
      // A single write needs no transaction of its own (as the separate statements always did).
      if (writes.length === 1) this.#apply(writes[0] as CheckpointWrite);
      else this.#db.transaction(() => writes.forEach((w) => this.#apply(w)))();
    });
  }

  #compactionRows(): CompactionRow[] {
    return (this.#compactions.all() as { layer_id: string; from_layers: string; maker_id: string }[]).map(
      (row) => ({
        layer: row.layer_id,
        from: JSON.parse(row.from_layers) as [string, string],
        maker: row.maker_id,
      }),
    );
  }

  #apply(w: CheckpointWrite): void {
    switch (w.op) {
      case 'insert': {
        const [row] = w.args;
        this.#insert.run({ ...row, layers: JSON.stringify(row.layers) });
        return;
      }
      case 'delete':
        this.#delete.run(w.args[0]);
        return;
      case 'markReady': {
        const [id, layers] = w.args;
        this.#ready.run(layers === undefined ? null : JSON.stringify(layers), id);
        return;
      }
      case 'setStack':
        this.#setStack.run(w.args[0], JSON.stringify(w.args[1]));
        return;
      case 'addLayer':
        this.#addLayer.run(...w.args);
        return;
      case 'setLayerBytes':
        this.#layerBytes.run(w.args[1], w.args[0]);
        return;
      case 'dropLayer':
        this.#dropLayer.run(w.args[0]);
        return;
      case 'replaceInCheckpoints': {
        const [from, layer] = w.args;
        for (const row of this.#allCheckpoints.all() as { id: string; layers: string }[]) {
          const layers = JSON.parse(row.layers) as string[];
          const replaced = replacePair(layers, from, layer);
          if (replaced !== layers) this.#setLayers.run(JSON.stringify(replaced), row.id);
        }
        return;
      }
      case 'dropCompaction':
        this.#dropCompaction.run(w.args[0]);
        return;
    }
  }
}
