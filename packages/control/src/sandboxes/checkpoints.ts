// Checkpoints: a sandbox's file state frozen as a layer (the worker renames its writable layer into the
// data directory's layer store; nothing is copied), listed, restored and deleted. The delta records the
// stack it stands on itself; the database holds the checkpoints and a mirror of each stack, settled from
// the worker's own report at every mount. A frozen layer is removed once no checkpoint and no sandbox's
// stack holds it.
import { readdir } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Logger } from 'pino';
import { initDeltaStack } from '@agentfense/fuse-worker';
import { InvalidArgumentError, UnavailableError, WrongStateError } from '@agentfense/protocol';
import type { AuditEvent } from '@agentfense/protocol';
import { isId, newId, validateId } from '../ids.js';
import type { DataLayout } from '../paths.js';
import { ensurePrivateDir } from '../paths.js';
import type { CheckpointRow, CheckpointStore } from '../store/checkpoints.js';
import type { SandboxRow } from '../store/sandboxes.js';
import type { CreateSandboxOptions, SandboxInfo } from './types.js';
import type { CheckpointLimits } from './checkpoint-limits.js';
import { limitSetting } from './checkpoint-limits.js';
import { KeyedLock } from './keyed-lock.js';
import { LayerCharges } from './layer-charges.js';
import type { CompactionStep } from './compactor.js';
import { StackCompactor } from './compactor.js';
import type { SandboxTrash } from './trash.js';

/** A checkpoint as the faces show it. */
export interface CheckpointInfo {
  readonly id: string;
  readonly sandboxId: string;
  readonly name: string | null;
  readonly message: string | null;
  /** How many frozen layers its stack has (the checkpoint's own is the last). */
  readonly depth: number;
  readonly createdAt: number;
}

export interface CheckpointOptions {
  /** A short label (at most 200 characters). */
  readonly name?: string;
  /** What the step before it did (at most 4,000 characters). */
  readonly message?: string;
}

export interface RestoreOptions {
  /** Keep the changes made since as a checkpoint of their own (its id is returned) instead of dropping them. */
  readonly keepCurrent?: boolean;
}

/** What the service needs from the sandbox manager: the worker calls, running or not. */
export interface CheckpointWorker {
  checkpoint(
    id: string,
    layerDir: string,
  ): Promise<{ readonly frozen: readonly string[]; readonly bytes?: number }>;
  restore(id: string, frozen: readonly string[]): Promise<void>;
  /** Builds the merged layer `to` of the pair `from` and, if `switchStack`, puts the delta on it. */
  compactLayers(
    id: string,
    from: readonly string[],
    to: string,
    switchStack: boolean,
  ): Promise<{ readonly frozen: readonly string[]; readonly bytes: number }>;
  /** Tells the sandbox's live worker (if any) what its frozen layers cost its disk quota. */
  setFrozenBytes(id: string, bytes: number): Promise<void>;
  /** Appends records to the sandbox's audit trail. */
  audit(id: string, events: readonly AuditEvent[]): Promise<void>;
}

/** A fork: the parent's settings unless given here (secrets are never inherited: give them again). */
export type ForkOptions = Pick<
  CreateSandboxOptions,
  'rules' | 'preset' | 'runtime' | 'image' | 'network' | 'resources' | 'env' | 'labels' | 'secrets'
> & {
  /** Fork from this checkpoint; default: from the sandbox's current files (a checkpoint is taken). */
  readonly checkpointId?: string;
  /** How many sandboxes (1-32, default 1). */
  readonly count?: number;
  /** Started at once (default true). */
  readonly start?: boolean;
};

/** What a fork needs from the control plane: the parent's record, and creating and starting sandboxes. */
export interface ForkHost {
  parent(id: string): Promise<SandboxRow>;
  create(options: CreateSandboxOptions): Promise<SandboxInfo>;
  start(id: string): Promise<SandboxInfo>;
}

const MAX_FORKS = 32;

const NAME_MAX = 200;
const MESSAGE_MAX = 4000;

export class CheckpointService {
  readonly #store: CheckpointStore;
  readonly #layout: DataLayout;
  readonly #worker: CheckpointWorker;
  readonly #trash: SandboxTrash;
  readonly #logger: Logger;
  /**
   * One change of checkpoints at a time in this process: a restore and a delete of the same checkpoint,
   * or a checkpoint and the removal of unused layers, must not interleave.
   */
  readonly #lock = new KeyedLock();
  /** Pending rows of checkpoints this process is taking now. */
  readonly #taking = new Set<string>();

  readonly #host: ForkHost;
  readonly #charges: LayerCharges;
  readonly #limits: CheckpointLimits;
  readonly #compactor: StackCompactor;

  constructor(options: {
    readonly store: CheckpointStore;
    readonly layout: DataLayout;
    readonly worker: CheckpointWorker;
    readonly host: ForkHost;
    readonly trash: SandboxTrash;
    readonly logger: Logger;
    readonly limits: CheckpointLimits;
    /** A test's stand-in for a process death at a step of a compaction (it throws there). */
    readonly compactionFault?: (step: CompactionStep) => void;
  }) {
    this.#limits = options.limits;
    this.#store = options.store;
    this.#layout = options.layout;
    this.#worker = options.worker;
    this.#host = options.host;
    this.#trash = options.trash;
    this.#logger = options.logger;
    this.#charges = new LayerCharges({
      store: this.#store,
      layout: this.#layout,
      push: (id, bytes) => this.#worker.setFrozenBytes(id, bytes),
      logger: this.#logger,
    });
    this.#compactor = new StackCompactor({
      store: this.#store,
      layout: this.#layout,
      lock: this.#lock,
      charges: this.#charges,
      logger: this.#logger,
      maxDepth: this.#limits.maxStackDepth,
      ...(options.compactionFault === undefined ? {} : { fault: options.compactionFault }),
      host: {
        compactLayers: (id, from, to, switchStack) => this.#worker.compactLayers(id, from, to, switchStack),
        layerIds: (dirs) => this.#layerIds(dirs),
        collect: () => this.#collect(),
        audit: (id, target) => this.#audit(id, 'compact', target),
      },
    });
  }

  /** What the frozen layers sandbox `id` made cost its disk quota (its mounts start with it). */
  frozenBytes(id: string): Promise<number> {
    return this.#charges.total(id);
  }

  /** Freezes sandbox `id`'s current changes as a checkpoint; the sandbox goes on where it was. */
  async checkpoint(sandboxId: string, options: CheckpointOptions = {}): Promise<CheckpointInfo> {
    const id = await this.#sandbox(sandboxId);
    checkText('name', options.name, NAME_MAX);
    checkText('message', options.message, MESSAGE_MAX);
    return this.#lock.run('', () => this.#take(id, options));
  }

  async #take(id: string, options: CheckpointOptions): Promise<CheckpointInfo> {
    const { maxCheckpoints, maxStackDepth } = this.#limits;
    if ((await this.#store.list(id)).length >= maxCheckpoints) {
      throw new WrongStateError(
        `sandbox ${id} has ${maxCheckpoints} checkpoints, the most it may keep ` +
          `(${limitSetting('maxCheckpoints')}): delete one first`,
      );
    }
    const layer = newId('layer');
    // A deeper stack is compacted in the background after the checkpoint; refused only when no two of
    // its layers may be folded (every boundary is a checkpoint's).
    const stack = await this.#store.stack(id);
    const after = [...stack, layer];
    if (after.length > maxStackDepth && !(await this.#compactor.canFold(id, after))) {
      throw new WrongStateError(
        `sandbox ${id} stands on ${maxStackDepth} frozen layers, the deepest stack allowed ` +
          `(${limitSetting('maxStackDepth')}), and each of them ends a checkpoint: delete a checkpoint, ` +
          'restore an older one, commit or discard first',
      );
    }
    const row: CheckpointRow = {
      id: newId('checkpoint'),
      sandbox_id: id,
      name: options.name ?? null,
      message: options.message ?? null,
      layers: after,
      state: 'pending',
      created_at: Date.now(),
    };
    // The row first: a crash while the worker freezes the layer leaves a reference to it (nothing
    // removes a layer a row names), and the next mount settles the row from what the delta recorded.
    // Its layer is charged to this sandbox from the start (measured once frozen).
    await this.#store.transaction((tx) => {
      tx.insert(row);
      tx.addLayer(layer, id, null);
    });
    this.#taking.add(row.id);
    let frozen: string[];
    let bytes: number | undefined;
    try {
      await ensurePrivateDir(this.#layout.layersDir);
      const made = await this.#worker.checkpoint(id, this.#layout.layerDir(layer));
      frozen = this.#layerIds(made.frozen);
      bytes = made.bytes;
    } catch (err) {
      await this.#store.transaction((tx) => {
        tx.delete(row.id);
        tx.dropLayer(layer); // recorded again if a mount finds it was frozen after all
      });
      throw err;
    } finally {
      this.#taking.delete(row.id);
    }
    await this.#store.transaction((tx) => {
      tx.markReady(row.id, frozen);
      tx.setStack(id, frozen);
      if (bytes !== undefined) tx.setLayerBytes(layer, bytes);
    });
    if (bytes === undefined) await this.#charges.adopt(id, [layer]); // no quota counted it: measured later
    // The worker counted the layer as it froze it; this is the total the database keeps.
    await this.#charges.push([id]);
    await this.#audit(id, 'checkpoint', row.id);
    if (frozen.length > maxStackDepth) this.#compactor.request(id);
    return info({ ...row, layers: frozen, state: 'ready' });
  }

  async list(sandboxId: string): Promise<CheckpointInfo[]> {
    return (await this.#store.list(await this.#sandbox(sandboxId))).map(info);
  }

  /**
   * Puts sandbox `id` back to checkpoint `checkpointId`: its changes since are dropped (or kept as a new
   * checkpoint with `keepCurrent`), and a running command sees the restored files at once.
   */
  restore(
    id: string,
    checkpointId: string,
    options: RestoreOptions = {},
  ): Promise<{ kept?: CheckpointInfo }> {
    validateId('checkpoint', checkpointId);
    return this.#lock.run('', async () => {
      const target = await this.#store.get(id, checkpointId);
      const kept =
        options.keepCurrent === true
          ? await this.#take(id, { name: `before restore of ${checkpointId}` })
          : undefined;
      await this.#worker.restore(
        id,
        target.layers.map((layer) => this.#layout.layerDir(layer)),
      );
      await this.#store.transaction((tx) => tx.setStack(id, target.layers));
      await this.#audit(id, 'restore', checkpointId);
      await this.#collect();
      return kept === undefined ? {} : { kept };
    });
  }

  /** Deletes a checkpoint; its layers are removed once nothing else holds them. */
  async remove(sandboxId: string, checkpointId: string): Promise<void> {
    const id = await this.#sandbox(sandboxId);
    validateId('checkpoint', checkpointId);
    return this.#lock.run('', async () => {
      await this.#store.get(id, checkpointId);
      await this.#store.transaction((tx) => tx.delete(checkpointId));
      await this.#collect();
      await this.#compactor.requestDeep(); // the boundary it ended may now be folded
    });
  }

  /**
   * New sandboxes whose files start as checkpoint `checkpointId` of sandbox `id` (or as its files now),
   * each with a writable layer of its own: their changes never reach each other or the parent. The
   * frozen layers are shared, never copied.
   */
  async fork(sandboxId: string, options: ForkOptions = {}): Promise<SandboxInfo[]> {
    const id = await this.#sandbox(sandboxId);
    const count = options.count ?? 1;
    if (!Number.isInteger(count) || count < 1 || count > MAX_FORKS) {
      throw new InvalidArgumentError(
        `fork count must be an integer from 1 to ${MAX_FORKS}, got ${String(count)}`,
      );
    }
    if (options.checkpointId !== undefined) validateId('checkpoint', options.checkpointId);
    const parent = await this.#host.parent(id);
    const forks = await this.#lock.run('', async () => {
      const from =
        options.checkpointId === undefined
          ? await this.#take(id, { name: 'fork' })
          : info(await this.#store.get(id, options.checkpointId));
      const { layers } = await this.#store.get(id, from.id);
      const made: SandboxInfo[] = [];
      for (let i = 0; i < count; i++) {
        const sandbox = await this.#host.create(forkSettings(parent, options));
        // The mirror first: a layer it names is never removed, even if a crash comes before the delta.
        await this.#store.transaction((tx) => tx.setStack(sandbox.id, layers));
        await initDeltaStack({
          deltaDir: this.#layout.sandbox(sandbox.id).delta,
          frozen: layers.map((layer) => this.#layout.layerDir(layer)),
        });
        made.push(sandbox);
        await this.#audit(id, 'fork', sandbox.id);
        await this.#audit(sandbox.id, 'forked-from', from.id);
      }
      return made;
    });
    if (options.start === false) return forks;
    const started: SandboxInfo[] = [];
    for (const sandbox of forks) started.push(await this.#host.start(sandbox.id));
    return started;
  }

  /**
   * After a mount: the worker's report of the stack its delta stands on is the truth. A pending row
   * whose layer made it into the stack becomes a checkpoint; one whose layer did not was never taken.
   */
  async settle(id: string, frozenDirs: readonly string[]): Promise<void> {
    const frozen = this.#layerIds(frozenDirs);
    // Read first: only the sandbox's owner writes its checkpoint rows, so they stay as read.
    const pending = await this.#store.pending(id);
    await this.#store.transaction((tx) => {
      for (const row of pending) {
        // Under way in this process (a stopped sandbox's temporary worker mounts for it): not settled.
        if (this.#taking.has(row.id)) continue;
        const layer = row.layers.at(-1);
        if (layer !== undefined && frozen.includes(layer)) tx.markReady(row.id);
        else {
          tx.delete(row.id);
          if (layer !== undefined) tx.dropLayer(layer);
        }
      }
      tx.setStack(id, frozen);
    });
    await this.#charges.adopt(id, frozen);
  }

  /**
   * After a commit or a discard the delta stands on no frozen layer: the mirror records the empty stack,
   * and the layers no checkpoint or other sandbox holds leave the disk and their maker's charge.
   */
  stackEmptied(id: string): Promise<void> {
    return this.#lock.run('', async () => {
      await this.#store.transaction((tx) => tx.setStack(id, []));
      await this.#collect();
    });
  }

  /** Removes the frozen layers nothing holds (after a destroy, a restore, a delete, and at open). */
  collect(): Promise<void> {
    return this.#lock.run('', () => this.#collect());
  }

  /** At open: compactions a crash cut short are finished or dropped, unused layers removed, deep stacks compacted. */
  async recover(): Promise<void> {
    await this.#lock.run('', async () => {
      await this.#compactor.recover();
      await this.#collect();
    });
    await this.#compactor.requestDeep();
  }

  /** Settles when the background compactions requested so far are done. */
  compacted(): Promise<void> {
    return this.#compactor.idle();
  }

  /** Stops background compaction (before the database closes). */
  stopCompacting(): Promise<void> {
    return this.#compactor.stop();
  }

  async #collect(): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.#layout.layersDir);
    } catch {
      return; // no layer store yet
    }
    const held = await this.#store.referencedLayers();
    const gone: string[] = [];
    for (const name of names) {
      // A `.tmp` name is a checkpoint under way or cut short: its delta finishes or undoes it.
      if (!isId('layer', name) || held.has(name)) continue;
      const dir = this.#layout.layerDir(name);
      if (await this.#trash.discard(dir, name)) gone.push(name);
      else this.#logger.warn({ layer: name }, 'could not move an unused checkpoint layer to the trash');
    }
    await this.#charges.forget([...gone, ...(await this.#charges.stale(held, new Set(names)))]);
  }

  /** Settles when the background measurement of layers a crash left unmeasured is done. */
  measured(): Promise<void> {
    return this.#charges.idle();
  }

  /** A valid id of an existing sandbox (InvalidArgumentError, NotFoundError otherwise). */
  async #sandbox(id: string): Promise<string> {
    await this.#host.parent(validateId('sandbox', id));
    return id;
  }

  /** A checkpoint, restore or fork in the sandbox's audit trail (`target`: the checkpoint or fork id). */
  async #audit(
    id: string,
    op: 'checkpoint' | 'restore' | 'fork' | 'forked-from' | 'compact',
    target: string,
  ): Promise<void> {
    await this.#worker.audit(id, [
      { seq: 0, time: Date.now(), op, path: '/', target, decision: 'allow', permission: 'write' },
    ]);
  }

  /** Layer ids from the worker's layer directories (each must be in this data directory's store). */
  #layerIds(dirs: readonly string[]): string[] {
    return dirs.map((dir) => {
      const id = basename(dir);
      if (!isId('layer', id) || this.#layout.layerDir(id) !== dir) {
        throw new UnavailableError(`the worker reported a frozen layer outside the layer store: ${dir}`);
      }
      return id;
    });
  }
}

/** A fork's settings: the parent's, with what the caller gives instead (an image only on the same runtime). */
function forkSettings(parent: SandboxRow, options: ForkOptions): CreateSandboxOptions {
  const runtime = options.runtime ?? parent.runtime;
  const image = options.image ?? (runtime === parent.runtime ? parent.image : null);
  const policy = options.rules !== undefined || options.preset !== undefined;
  return {
    codebaseId: parent.codebase_id,
    runtime,
    ...(image === null ? {} : { image }),
    ...(policy
      ? {
          ...(options.rules === undefined ? {} : { rules: options.rules }),
          ...(options.preset === undefined ? {} : { preset: options.preset }),
        }
      : { rules: parent.rules }),
    network: options.network ?? { mode: parent.network.mode, rules: parent.network.rules },
    resources: options.resources ?? parent.resources,
    env: options.env ?? parent.env,
    auditAllowed: parent.audit_allowed,
    ...(options.labels === undefined ? {} : { labels: options.labels }),
    ...(options.secrets === undefined ? {} : { secrets: options.secrets }),
  };
}

function info(row: CheckpointRow): CheckpointInfo {
  return {
    id: row.id,
    sandboxId: row.sandbox_id,
    name: row.name,
    message: row.message,
    depth: row.layers.length,
    createdAt: row.created_at,
  };
}

function checkText(field: string, value: string | undefined, max: number): void {
  if (value === undefined) return;
  if (typeof value !== 'string' || value.length > max || value.includes('\0')) {
    throw new InvalidArgumentError(
      `checkpoint ${field} must be a string of at most ${max} characters without NUL bytes`,
    );
  }
}
