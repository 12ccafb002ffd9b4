// What each sandbox's frozen layers cost it: a layer is charged to the sandbox that made it (a fork's
// inherited layers to its parent, never twice), from the moment it is frozen until it leaves the disk.
// The database holds each layer's bytes; every live worker of a maker is told its total, and every mount
// starts with it (mountParams), so a write that takes writable + frozen over the disk limit fails.
import type { Logger } from 'pino';
import { layerBytes } from '@agentfense/fuse-worker';
import type { DataLayout } from '../paths.js';
import type { CheckpointStore } from '../store/checkpoints.js';

export class LayerCharges {
  readonly #store: CheckpointStore;
  readonly #layout: DataLayout;
  readonly #push: (id: string, bytes: number) => Promise<void>;
  readonly #logger: Logger;
  /** The background measurement of layers a crash left unmeasured, chained; never rejects. */
  #measuring: Promise<void> = Promise.resolve();

  constructor(options: {
    readonly store: CheckpointStore;
    readonly layout: DataLayout;
    /** Tells sandbox `id`'s live worker (if any) its total. */
    readonly push: (id: string, bytes: number) => Promise<void>;
    readonly logger: Logger;
  }) {
    this.#store = options.store;
    this.#layout = options.layout;
    this.#push = options.push;
    this.#logger = options.logger;
  }

  /** The total a sandbox's own frozen layers cost it (what its mounts start with). */
  total(makerId: string): Promise<number> {
    return this.#store.frozenBytes(makerId);
  }

  /** Tells each of `makers`' live workers its total now (a failure is logged: the next mount has it). */
  async push(makers: Iterable<string>): Promise<void> {
    for (const id of new Set(makers)) {
      try {
        await this.#push(id, await this.total(id));
      } catch (err) {
        this.#logger.warn({ err, sandboxId: id }, 'could not tell the worker its checkpoints’ charge');
      }
    }
  }

  /**
   * Layers of `frozen` (a stack a mount reported) with no record are made by `id` (a sandbox gains a
   * layer it did not make by a fork, whose layers have records, or by a compaction, whose row names the
   * merged layer's maker until its record is written): recorded, then measured in the background, as are
   * layers recorded but never measured (a crash between the freeze and the row).
   */
  async adopt(id: string, frozen: readonly string[]): Promise<void> {
    const known = new Map((await this.#store.layers()).map((row) => [row.id, row]));
    // A fork switched onto a merged layer may report it before the compaction records it: the pair's
    // maker pays for it, never the fork.
    const merging = new Map((await this.#store.compactions()).map((row) => [row.layer, row.maker]));
    const unknown = frozen.filter((layer) => !known.has(layer));
    if (unknown.length > 0) {
      await this.#store.transaction((tx) => {
        for (const layer of unknown) tx.addLayer(layer, merging.get(layer) ?? id, null);
      });
    }
    const unmeasured = [...frozen].filter((layer) => (known.get(layer)?.bytes ?? null) === null);
    if (unmeasured.length > 0) this.#measureLater(unmeasured);
  }

  /** Layers that left the disk: their records go, and their makers' workers hear the new totals. */
  async forget(layers: readonly string[]): Promise<void> {
    if (layers.length === 0) return;
    const makers = new Map((await this.#store.layers()).map((row) => [row.id, row.maker_id]));
    await this.#store.transaction((tx) => {
      for (const layer of layers) tx.dropLayer(layer);
    });
    await this.push(layers.flatMap((layer) => makers.get(layer) ?? []));
  }

  /** Records whose layer nothing holds and no directory holds either (a layer removed before its row). */
  async stale(held: ReadonlySet<string>, onDisk: ReadonlySet<string>): Promise<string[]> {
    return (await this.#store.layers()).map((row) => row.id).filter((id) => !held.has(id) && !onDisk.has(id));
  }

  /** Settles when the background measurements asked for so far are done (tests, close). */
  idle(): Promise<void> {
    return this.#measuring;
  }

  #measureLater(layers: readonly string[]): void {
    this.#measuring = this.#measuring.then(async () => {
      const makers: string[] = [];
      for (const layer of layers) {
        try {
          const bytes = await layerBytes(this.#layout.layerDir(layer));
          await this.#store.transaction((tx) => tx.setLayerBytes(layer, bytes));
          const row = (await this.#store.layers()).find((r) => r.id === layer);
          if (row !== undefined) makers.push(row.maker_id);
        } catch (err) {
          this.#logger.warn({ err, layer }, 'could not measure a checkpoint layer');
        }
      }
      await this.push(makers);
    });
  }
}
