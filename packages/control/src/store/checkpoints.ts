// Checkpoint records and each sandbox's layer stack: what every backend offers over `checkpoints` and
// `sandbox_stacks` (migration 8; layer ids as JSON arrays, oldest first), what each frozen layer costs
// the sandbox that made it, in `layers` (migration 9), and stack compactions under way in `compactions`
// (migration 10). SQLite's is sqlite-checkpoints.ts, PostgreSQL's postgres/checkpoints.ts.
import { NotFoundError } from '@agentfense/protocol';

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

/** A checkpoint row as either database returns it: its layers still JSON text. */
export interface RawCheckpoint extends Omit<CheckpointRow, 'layers'> {
  readonly layers: string;
}

/** A row read from either backend, its layer list parsed. */
export function decodeCheckpoint(raw: RawCheckpoint): CheckpointRow {
  return { ...raw, layers: JSON.parse(raw.layers) as string[] };
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

/**
 * The writes of one transaction. They are recorded while the callback runs and applied together after
 * it, all or none: reads happen before (only a sandbox's owner writes its checkpoints, so what it read
 * still holds), which keeps a transaction's callback synchronous for both backends.
 */
export interface CheckpointWriter {
  insert(row: CheckpointRow): void;
  delete(id: string): void;
  /** The checkpoint was taken; `layers`, when given, is its stack as the worker reported it. */
  markReady(id: string, layers?: readonly string[]): void;
  setStack(sandboxId: string, layers: readonly string[]): void;
  /** Records layer `id`, made by sandbox `makerId`, costing `bytes` (null: not measured yet). */
  addLayer(id: string, makerId: string, bytes: number | null): void;
  setLayerBytes(id: string, bytes: number): void;
  /** The layer left the disk: it costs its maker nothing any more. */
  dropLayer(id: string): void;
  /** Checkpoint rows naming the adjacent pair `from` name `layer` in its place instead (a compaction). */
  replaceInCheckpoints(from: readonly [string, string], layer: string): void;
  dropCompaction(layer: string): void;
}

/** One recorded write: the writer's method and its arguments. */
export type CheckpointWrite = {
  [K in keyof CheckpointWriter]: { readonly op: K; readonly args: Parameters<CheckpointWriter[K]> };
}[keyof CheckpointWriter];

/** Records the writes `fn` makes, in order. */
export function recordWrites(fn: (tx: CheckpointWriter) => void): CheckpointWrite[] {
  const writes: CheckpointWrite[] = [];
  const tx: CheckpointWriter = {
    insert: (...args) => writes.push({ op: 'insert', args }),
    delete: (...args) => writes.push({ op: 'delete', args }),
    markReady: (...args) => writes.push({ op: 'markReady', args }),
    setStack: (...args) => writes.push({ op: 'setStack', args }),
    addLayer: (...args) => writes.push({ op: 'addLayer', args }),
    setLayerBytes: (...args) => writes.push({ op: 'setLayerBytes', args }),
    dropLayer: (...args) => writes.push({ op: 'dropLayer', args }),
    replaceInCheckpoints: (...args) => writes.push({ op: 'replaceInCheckpoints', args }),
    dropCompaction: (...args) => writes.push({ op: 'dropCompaction', args }),
  };
  fn(tx);
  return writes;
}

/** Every layer list that holds layers: each checkpoint's (pending too) and each sandbox's stack. */
export interface LayerHolders {
  readonly checkpoints: string[][];
  readonly stacks: Map<string, string[]>;
}

export interface CheckpointStore {
  /** The checkpoint `id` of sandbox `sandboxId`, or NotFoundError (a pending one is not there yet). */
  get(sandboxId: string, id: string): Promise<CheckpointRow>;
  /** A sandbox's checkpoints, oldest first. */
  list(sandboxId: string): Promise<CheckpointRow[]>;
  /** Checkpoints a crash left between their row and their layer (settled at the next mount). */
  pending(sandboxId: string): Promise<CheckpointRow[]>;
  /** The stack the sandbox's delta stood on when last told ([] when it never had a checkpoint). */
  stack(sandboxId: string): Promise<string[]>;
  /** Every layer id some checkpoint (pending ones too), some sandbox's stack or a compaction holds. */
  referencedLayers(): Promise<Set<string>>;
  holders(): Promise<LayerHolders>;
  compactions(): Promise<CompactionRow[]>;
  addCompaction(row: CompactionRow): Promise<void>;
  /** What the frozen layers sandbox `makerId` made cost it (those a fork stands on included). */
  frozenBytes(makerId: string): Promise<number>;
  /** Every recorded layer: its maker and its bytes (null: not measured yet). */
  layers(): Promise<LayerRow[]>;
  /** Applies the writes `fn` records in one transaction (see CheckpointWriter). */
  transaction(fn: (tx: CheckpointWriter) => void): Promise<void>;
}

/** The NotFoundError of a checkpoint that is not (yet) there. */
export function checkpointNotFound(sandboxId: string, id: string): NotFoundError {
  return new NotFoundError(`checkpoint ${id} not found in sandbox ${sandboxId}`);
}

/** A ready checkpoint of the sandbox, or NotFoundError. */
export function readyCheckpoint(
  sandboxId: string,
  id: string,
  row: CheckpointRow | undefined,
): CheckpointRow {
  if (row === undefined || row.sandbox_id !== sandboxId || row.state !== 'ready') {
    throw checkpointNotFound(sandboxId, id);
  }
  return row;
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
