// Background compaction of stacks deeper than `maxStackDepth`: two adjacent frozen layers no checkpoint
// ends between are folded into one merged layer, built by a worker from hard links of theirs, then every
// sandbox standing on the pair is switched onto it, the checkpoint rows name it, and the pair leaves the
// disk once nothing holds it. What anyone sees never changes. A `compactions` row, written before the
// merged layer exists, keeps all three layers on disk until the compaction is finished or dropped, so a
// crash at any step leaves each delta on its old stack or its new one and recovery cleans the rest.
import { lstat, rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import { readStack } from '@agentfense/fuse-worker';
import { newId } from '../ids.js';
import type { DataLayout } from '../paths.js';
import type { CheckpointStore, CompactionRow } from '../store/checkpoints.js';
import { replacePair } from '../store/checkpoints.js';
import type { CheckpointWorker } from './checkpoints.js';
import { foldablePair } from './compaction-plan.js';
import type { KeyedLock } from './keyed-lock.js';
import type { LayerCharges } from './layer-charges.js';

/** The steps of a compaction, named for the fault hook (a test stops the compaction there). */
export type CompactionStep = 'planned' | 'built' | 'switched' | 'recorded';

/** What the compactor needs from the checkpoint service and the workers. */
export interface CompactorHost {
  /** Builds `to` from the pair `from` (directories) on sandbox `id`'s worker, and switches its delta if `switchStack`. */
  compactLayers: CheckpointWorker['compactLayers'];
  /** Layer ids of a worker's layer directories. */
  layerIds(dirs: readonly string[]): string[];
  /** Removes the layers nothing holds (called under the lock). */
  collect(): Promise<void>;
  /** A `compact` record in sandbox `id`'s audit trail (`target`: the merged layer). */
  audit(id: string, target: string): Promise<void>;
}

export class StackCompactor {
  readonly #store: CheckpointStore;
  readonly #layout: DataLayout;
  readonly #lock: KeyedLock;
  readonly #charges: LayerCharges;
  readonly #host: CompactorHost;
  readonly #logger: Logger;
  readonly #maxDepth: number;
  readonly #fault: ((step: CompactionStep) => void) | undefined;
  readonly #queued = new Set<string>();
  /** Compactions a crash cut short after their merged layer was complete: finished first. */
  readonly #resume: CompactionRow[] = [];
  #running: Promise<void> = Promise.resolve();
  #active = false;
  #stopped = false;

  constructor(o: {
    readonly store: CheckpointStore;
    readonly layout: DataLayout;
    readonly lock: KeyedLock;
    readonly charges: LayerCharges;
    readonly host: CompactorHost;
    readonly logger: Logger;
    readonly maxDepth: number;
    readonly fault?: (step: CompactionStep) => void;
  }) {
    this.#store = o.store;
    this.#layout = o.layout;
    this.#lock = o.lock;
    this.#charges = o.charges;
    this.#host = o.host;
    this.#logger = o.logger;
    this.#maxDepth = o.maxDepth;
    this.#fault = o.fault;
  }

  /**
   * Whether sandbox `id` standing on `stack` (after a checkpoint that makes it so deep; its last layer the
   * new one, a checkpoint's end) could be made shallower: false when every boundary is a checkpoint's.
   */
  async canFold(id: string, stack: readonly string[]): Promise<boolean> {
    const { checkpoints, stacks } = await this.#store.holders();
    stacks.set(id, [...stack]);
    const makers = new Map((await this.#store.layers()).map((row) => [row.id, row.maker_id]));
    const top = stack.at(-1);
    if (top !== undefined) makers.set(top, id);
    const holders = [...checkpoints, stack, ...stacks.values()];
    return foldablePair({ stack, holders, makerOf: (layer) => makers.get(layer) }) !== null;
  }

  /** Compacts sandbox `id`'s stack in the background if it is deeper than the limit. */
  request(id: string): void {
    this.#queued.add(id);
    this.#kick();
  }

  #kick(): void {
    if (this.#stopped || this.#active || (this.#queued.size === 0 && this.#resume.length === 0)) return;
    this.#active = true;
    this.#running = this.#drain().finally(() => {
      this.#active = false;
      this.#kick(); // a request that came as the drain ended
    });
  }

  /** Every sandbox whose stack is deeper than the limit (after a delete frees a boundary, at open). */
  async requestDeep(): Promise<void> {
    for (const [id, layers] of (await this.#store.holders()).stacks) {
      if (layers.length > this.#maxDepth) this.#queued.add(id);
    }
    this.#kick();
  }

  /** Settles when the compactions requested so far are done. */
  idle(): Promise<void> {
    return this.#running;
  }

  /** No new compaction starts; settles when the one under way stops. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#queued.clear();
    await this.#running;
  }

  async #drain(): Promise<void> {
    for (let row = this.#resume.shift(); row !== undefined && !this.#stopped; row = this.#resume.shift()) {
      try {
        await this.#complete(row, null, true);
      } catch (err) {
        this.#logger.warn({ err, layer: row.layer }, 'finishing a stack compaction stopped');
      }
    }
    for (let id = first(this.#queued); id !== undefined; id = first(this.#queued)) {
      this.#queued.delete(id);
      try {
        while (!this.#stopped && (await this.#once(id)));
      } catch (err) {
        this.#logger.warn({ err, sandboxId: id }, 'a stack compaction stopped: recovery finishes it');
      }
    }
  }

  /** One fold of sandbox `id`'s stack; false when there is nothing (more) to do. */
  async #once(id: string): Promise<boolean> {
    const row = await this.#lock.run('', () => this.#plan(id));
    if (row === null) return false;
    this.#fault?.('planned');
    let bytes: number | null = null;
    try {
      // Built outside the lock (it walks both layers); nothing may remove them while the row exists.
      bytes = (await this.#host.compactLayers(id, this.#dirs(row.from), this.#dir(row.layer), false)).bytes;
    } catch (err) {
      this.#logger.warn({ err, sandboxId: id, layer: row.layer }, 'building a merged layer failed');
    }
    this.#fault?.('built');
    await this.#complete(row, bytes, bytes !== null);
    if (bytes !== null) this.#logger.info({ sandboxId: id, from: row.from, layer: row.layer }, 'compact');
    return bytes !== null;
  }

  /**
   * The rest of a compaction once its merged layer is `built` (or not): the holders switched, the
   * records updated, the pair removed if nothing holds it any more.
   */
  async #complete(row: CompactionRow, bytes: number | null, built: boolean): Promise<void> {
    await this.#lock.run('', async () => {
      const switched = built ? await this.#switchHolders(row) : [];
      this.#fault?.('switched');
      await this.#finish(row, bytes);
      this.#fault?.('recorded');
      await this.#host.collect();
      await this.#charges.push([row.maker]);
      for (const holder of switched) await this.#host.audit(holder, row.layer);
    });
  }

  /** Under the lock: the pair to fold in `id`'s stack, recorded as a compaction under way; or null. */
  async #plan(id: string): Promise<CompactionRow | null> {
    const stack = await this.#store.stack(id);
    if (stack.length <= this.#maxDepth) return null;
    const { checkpoints, stacks } = await this.#store.holders();
    const layers = await this.#store.layers();
    const makers = new Map(layers.map((row) => [row.id, row.maker_id]));
    const busy = new Set((await this.#store.compactions()).flatMap((row) => [row.layer, ...row.from]));
    const pair = foldablePair({
      stack,
      holders: [...checkpoints, ...stacks.values()],
      makerOf: (layer) => makers.get(layer),
      busy,
    });
    if (pair === null) return null;
    const row: CompactionRow = { layer: newId('layer'), from: pair, maker: makers.get(pair[0]) as string };
    await this.#store.addCompaction(row);
    return row;
  }

  /** Under the lock: every sandbox standing on the pair is put on the merged layer; those switched. */
  async #switchHolders(row: CompactionRow): Promise<string[]> {
    const switched: string[] = [];
    for (const [holder, layers] of (await this.#store.holders()).stacks) {
      if (replacePair(layers, row.from, row.layer) === layers) continue;
      try {
        const made = await this.#host.compactLayers(holder, this.#dirs(row.from), this.#dir(row.layer), true);
        // The delta's own report is its stack (a crash before this line: its next mount settles it).
        const frozen = this.#host.layerIds(made.frozen);
        await this.#store.transaction((tx) => tx.setStack(holder, frozen));
        switched.push(holder);
      } catch (err) {
        // It stays on the pair, which stays on disk for it: still the same view.
        this.#logger.warn({ err, sandboxId: holder, layer: row.layer }, 'switching a stack failed');
      }
    }
    return switched;
  }

  /**
   * Under the lock: a merged layer that exists whole replaces the pair in every checkpoint row and is
   * charged to the pair's maker; one cut short leaves no trace. Either way the row goes.
   */
  async #finish(row: CompactionRow, bytes: number | null): Promise<void> {
    const dir = this.#dir(row.layer);
    const whole = await exists(dir);
    await this.#store.transaction((tx) => {
      if (whole) {
        tx.replaceInCheckpoints(row.from, row.layer);
        tx.addLayer(row.layer, row.maker, bytes);
      }
      tx.dropCompaction(row.layer);
    });
    if (whole && bytes === null) await this.#charges.adopt(row.maker, [row.layer]); // measured later
    await removeLeftover(`${dir}.tmp`);
  }

  /**
   * At open, under the lock: compactions a crash cut short. Each sandbox on the pair whose delta recorded
   * the merged layer is mirrored so; one whose merged layer was never completed is dropped; the others
   * are finished in the background (the holders still on the pair switched, the records updated).
   */
  async recover(): Promise<void> {
    for (const row of await this.#store.compactions()) {
      for (const [holder, layers] of (await this.#store.holders()).stacks) {
        if (replacePair(layers, row.from, row.layer) === layers) continue;
        try {
          const recorded = this.#host.layerIds(await readStack(this.#layout.sandbox(holder).delta));
          if (recorded.includes(row.layer))
            await this.#store.transaction((tx) => tx.setStack(holder, recorded));
        } catch (err) {
          this.#logger.warn({ err, sandboxId: holder }, 'reading a delta’s stack failed');
        }
      }
      if (await exists(this.#dir(row.layer))) this.#resume.push(row);
      else await this.#finish(row, null);
    }
  }

  #dir(layer: string): string {
    return this.#layout.layerDir(layer);
  }

  #dirs(layers: readonly string[]): string[] {
    return layers.map((layer) => this.#dir(layer));
  }
}

function first(set: ReadonlySet<string>): string | undefined {
  for (const value of set) return value;
  return undefined;
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** A half-built merged layer (`<layer>.tmp`), removed: it never held anything a stack named. */
async function removeLeftover(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true });
}
