// Checkpoint rows and each sandbox's layer stack: prepared statements over `checkpoints` and
// `sandbox_stacks` (migration 8; layer ids as JSON arrays, oldest first), and what each frozen layer
// costs the sandbox that made it, in `layers` (migration 9); stack compactions under way in `compactions`
// (migration 10).
import type { Statement } from 'better-sqlite3';
import { NotFoundError } from '@agentfense/protocol';
import type { Db } from './db.js';

/** A checkpoint row, decoded. Times are ms since the epoch. */
export interface CheckpointRow {
  readonly id: string;
  readonly sandbox_id: string;
  readonly name: string | null;
  readonly message: string | null;
  /** The frozen layers of its stack, oldest first: restoring puts the sandbox back on exactly these. */
  readonly layers: readonly string[];
  /** 'pending' while the worker freezes its layer. */
  readonly state: 'pending' | 'ready';
  readonly created_at: number;
}

/** A frozen layer's record: who made it (whose quota it is charged to) and what it costs. */
export interface LayerRow {
  readonly id: string;
  readonly maker_id: string;
  readonly bytes: number | null;
}

/** A compaction under way: `layer` is being made from the adjacent pair `from` (lower, upper). */
export interface CompactionRow {
  readonly layer: string;
  readonly from: readonly [string, string];
  readonly maker: string;
}

interface RawCheckpoint extends Omit<CheckpointRow, 'layers'> {
  readonly layers: string;
}

function decode(raw: RawCheckpoint): CheckpointRow {
  return { ...raw, layers: JSON.parse(raw.layers) as string[] };
}

export class CheckpointStore {
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
  readonly #allStacks: Statement;
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
    this.#allStacks = db.prepare('SELECT layers FROM sandbox_stacks');
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

  insert(row: CheckpointRow): void {
    this.#insert.run({ ...row, layers: JSON.stringify(row.layers) });
  }

  /** The checkpoint `id` of sandbox `sandboxId`, or NotFoundError (a pending one is not there yet). */
  get(sandboxId: string, id: string): CheckpointRow {
    const raw = this.#get.get(id) as RawCheckpoint | undefined;
    if (raw === undefined || raw.sandbox_id !== sandboxId || raw.state !== 'ready') {
      throw new NotFoundError(`checkpoint ${id} not found in sandbox ${sandboxId}`);
    }
    return decode(raw);
  }

  /** A sandbox's checkpoints, oldest first. */
  list(sandboxId: string): CheckpointRow[] {
    return (this.#bySandbox.all(sandboxId) as RawCheckpoint[]).map(decode);
  }

  /** Checkpoints a crash left between their row and their layer (settled at the next mount). */
  pending(sandboxId: string): CheckpointRow[] {
    return (this.#pending.all(sandboxId) as RawCheckpoint[]).map(decode);
  }

  /** The checkpoint was taken; `layers`, when given, is its stack as the worker reported it. */
  markReady(id: string, layers?: readonly string[]): void {
    this.#ready.run(layers === undefined ? null : JSON.stringify(layers), id);
  }

  delete(id: string): void {
    this.#delete.run(id);
  }

  /** The stack the sandbox's delta stood on when last told ([] when it never had a checkpoint). */
  stack(sandboxId: string): string[] {
    const raw = this.#stack.get(sandboxId) as { layers: string } | undefined;
    return raw === undefined ? [] : (JSON.parse(raw.layers) as string[]);
  }

  setStack(sandboxId: string, layers: readonly string[]): void {
    this.#setStack.run(sandboxId, JSON.stringify(layers));
  }

  /** Every layer id some checkpoint (pending ones too) or some sandbox's stack holds. */
  referencedLayers(): Set<string> {
    const ids = new Set<string>();
    const rows = [
      ...(this.#allLayers.all() as { layers: string }[]),
      ...(this.#allStacks.all() as { layers: string }[]),
    ];
    for (const row of rows) for (const id of JSON.parse(row.layers) as string[]) ids.add(id);
    for (const row of this.compactions()) for (const id of [row.layer, ...row.from]) ids.add(id);
    return ids;
  }

  /** Every layer list that holds layers: each checkpoint's (pending too) and each sandbox's stack. */
  holders(): { readonly checkpoints: string[][]; readonly stacks: Map<string, string[]> } {
    const checkpoints = (this.#allLayers.all() as { layers: string }[]).map(
      (row) => JSON.parse(row.layers) as string[],
    );
    const stacks = new Map<string, string[]>();
    for (const row of this.#stackRows.all() as { sandbox_id: string; layers: string }[]) {
      stacks.set(row.sandbox_id, JSON.parse(row.layers) as string[]);
    }
    return { checkpoints, stacks };
  }

  /** Checkpoint rows naming the adjacent pair `from` name `layer` in its place instead (a compaction). */
  replaceInCheckpoints(from: readonly [string, string], layer: string): void {
    for (const row of this.#allCheckpoints.all() as { id: string; layers: string }[]) {
      const layers = JSON.parse(row.layers) as string[];
      const replaced = replacePair(layers, from, layer);
      if (replaced !== layers) this.#setLayers.run(JSON.stringify(replaced), row.id);
    }
  }

  compactions(): CompactionRow[] {
    return (this.#compactions.all() as { layer_id: string; from_layers: string; maker_id: string }[]).map(
      (row) => ({
        layer: row.layer_id,
        from: JSON.parse(row.from_layers) as [string, string],
        maker: row.maker_id,
      }),
    );
  }

  addCompaction(row: CompactionRow): void {
    this.#addCompaction.run(row.layer, JSON.stringify(row.from), row.maker);
  }

  dropCompaction(layer: string): void {
    this.#dropCompaction.run(layer);
  }

  /** Records layer `id`, made by sandbox `makerId`, costing `bytes` (null: not measured yet). */
  addLayer(id: string, makerId: string, bytes: number | null): void {
    this.#addLayer.run(id, makerId, bytes);
  }

  setLayerBytes(id: string, bytes: number): void {
    this.#layerBytes.run(bytes, id);
  }

  /** The layer left the disk: it costs its maker nothing any more. */
  dropLayer(id: string): void {
    this.#dropLayer.run(id);
  }

  /** What the frozen layers sandbox `makerId` made cost it (those a fork stands on included). */
  frozenBytes(makerId: string): number {
    return (this.#madeBytes.get(makerId) as { bytes: number }).bytes;
  }

  /** Every recorded layer: its maker and its bytes (null: not measured yet). */
  layers(): LayerRow[] {
    return this.#layerRows.all() as LayerRow[];
  }

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: () => T): T {
    return this.#db.transaction(fn)();
  }
}

/** `layers` with the adjacent pair `from` replaced by `layer`; the same array when it holds no such pair. */
export function replacePair(
  layers: readonly string[],
  from: readonly [string, string],
  layer: string,
): readonly string[] {
  const at = layers.findIndex((id, i) => id === from[0] && layers[i + 1] === from[1]);
  return at < 0 ? layers : [...layers.slice(0, at), layer, ...layers.slice(at + 2)];
}
