// A delta's stack of frozen layers and the changes of it: checkpoint, restore and the flatten a commit
// needs, each crash-safe (layer-change.ts, flatten.ts), adopted as a new DeltaContext; the layers and
// upper trees they replaced, closed later; the trash restores leave, removed in the background; and the
// epoch that tells holders of writable fds when theirs may name a frozen file.
import { FsError } from '../errors.js';
import { HostDir } from '../host/host-dir.js';
import { Yielder } from '../host/yielder.js';
import { computeChanges, type DeltaChange } from './changes.js';
import { abandonUnfinishedCommit } from './commit-resume.js';
import type { DeltaContext } from './context.js';
import { flattenStack, settleFlatten } from './flatten.js';
import { closeViews, normalizeStack, openFrozenStack, stackOf, type FrozenStack } from './frozen-stack.js';
import { FrozenView } from './frozen-view.js';
import {
  checkpointLayer,
  restoreLayers,
  resumeLayerChange,
  type LayerChangeContext,
  type LayerChangeResult,
} from './layer-change.js';
import { writeStack } from './layer-stack.js';
import { checkLayerDirs, checkLayerTarget } from './layer-target.js';
import { computeStackChanges } from './stack-changes.js';
import { afterAnswer, emptyTrash } from './trash.js';

export class LayerSwitch {
  readonly #deltaDir: string;
  #stack: FrozenStack;
  /**
   * The upper tree and frozen layers the last checkpoint or restore replaced: a lookup that started
   * before may still use them, so they are closed at the next layer change (or with the delta).
   */
  #retired: { close(): Promise<void> }[] = [];
  /** The closes of what earlier changes replaced (#retire), chained; never rejects. */
  #closing: Promise<void> = Promise.resolve();
  /** Set when a layer change failed and could not be finished: nothing may change the delta any more. */
  #broken: Error | null = null;
  #epoch = 0;
  /** The background removal of the trash (what restores dropped), chained; never rejects. */
  #trash: Promise<void> = Promise.resolve();
  /** See Delta.onLayerChange. */
  onLayerChange: (() => void) | undefined;

  constructor(options: { deltaDir: string; stack: FrozenStack }) {
    this.#deltaDir = options.deltaDir;
    this.#stack = options.stack;
  }

  get epoch(): number {
    return this.#epoch;
  }

  get views(): readonly FrozenView[] {
    return this.#stack.views;
  }

  get frozenLayers(): readonly string[] {
    return this.#stack.views.map((view) => view.dir);
  }

  /** The failure that left a layer change unfinished, or null. */
  get broken(): Error | null {
    return this.#broken;
  }

  trashEmptied(): Promise<void> {
    return this.#trash;
  }

  emptyTrashLater(logger: DeltaContext['logger']): void {
    this.#trash = this.#trash
      .then(() => emptyTrash(this.#deltaDir))
      .catch((err: unknown) => logger.warn({ err }, 'removing the trash of dropped layers failed'));
  }

  /** The change set against the codebase: of the writable layer alone, or the net one of the stack. */
  changeSet(ctx: DeltaContext): Promise<DeltaChange[]> {
    const views = this.#stack.views;
    if (views.length === 0) return computeChanges(ctx);
    return computeStackChanges({ frozen: views.map((view) => view.layer), top: ctx, codebase: ctx.codebase });
  }

  /** Closes the frozen layers and what changes replaced (the delta closes its own context). */
  async close(): Promise<void> {
    await closeViews(this.#stack.views);
    await this.#closing;
    for (const old of this.#retired) await old.close();
  }

  /**
   * Makes `next` what the last change replaced, and closes what the change before replaced, in the
   * background after the answer: each close is a thread-pool trip, milliseconds on a loaded host, that
   * the answer of a change need not wait for (the same moment as before for a lookup still using them).
   */
  #retire(next: { close(): Promise<void> }[], logger: DeltaContext['logger']): void {
    const old = this.#retired;
    this.#retired = next;
    this.#closing = this.#closing
      .then(() =>
        afterAnswer(async () => {
          for (const o of old) await o.close();
        }),
      )
      .catch((err: unknown) => logger.debug({ err }, 'closing the trees a layer change replaced failed'));
  }

  /**
   * Freezes the writable layer into the new directory `layerDir` (its parent on the delta's filesystem)
   * and continues with an empty writable layer over it; the view does not change. O(1) in the layer's
   * data (renames); crash-safe (layer-change.ts). Writable handles opened before must be closed first:
   * they would write into the frozen layer.
   */
  async checkpoint(ctx: DeltaContext, target: string): Promise<DeltaContext> {
    const layerDir = checkLayerTarget({
      layerDir: target,
      deltaDir: this.#deltaDir,
      codebaseDir: ctx.codebase.path,
    });
    if (ctx.commits.mayBePending() && (await ctx.commits.pending()) !== null) {
      throw new FsError('EBUSY', 'an unfinished commit must be finished or discarded before a checkpoint');
    }
    return this.#change(
      ctx,
      (c) => checkpointLayer(c, layerDir),
      (result) => {
        // The state just frozen is the layer's (its files hold the same records): nothing read back.
        const below = this.#stack.views.at(-1) ?? ctx.codebase;
        const view = FrozenView.fromState({ dir: layerDir, meta: ctx.meta, below });
        return Promise.resolve({ ...stackOf(ctx.codebase, [...this.#stack.views, view]), result });
      },
    );
  }

  /**
   * Drops the writable layer's content (as a discard of everything does, an unfinished commit included)
   * and makes `frozen` (frozen layer directories, oldest first) the stack: usually a prefix of the
   * current one, to roll back to a checkpoint; [] shows the codebase again. Crash-safe (layer-change.ts).
   */
  async restore(ctx: DeltaContext, frozen: readonly string[]): Promise<DeltaContext> {
    const dirs = normalizeStack(frozen);
    // The layers are checked (and opened) before anything changes.
    checkLayerDirs({ dirs, deltaDir: this.#deltaDir, codebaseDir: ctx.codebase.path });
    // The layers already open that stay (a prefix of the stack) are reused, not opened again.
    const stack = await openFrozenStack(ctx.codebase, dirs, this.#stack.views);
    try {
      await abandonUnfinishedCommit(ctx, new Yielder());
      return await this.#change(
        ctx,
        (c) => restoreLayers(c, dirs),
        (result) => Promise.resolve({ ...stack, result }),
      );
    } catch (err) {
      if (this.#stack.views !== stack.views) {
        await closeViews(stack.views.filter((view) => !this.#stack.views.includes(view)));
      }
      throw err;
    } finally {
      // The dropped upper/ (and any older trash) goes after the answer, never before it.
      this.emptyTrashLater(ctx.logger);
    }
  }

  /**
   * Runs a layer change, then adopts its outcome: a new context with a fresh upper HostDir (the old one's
   * caches describe the tree that left), the new stack and the new (empty) metadata. A failure is
   * finished (forward or back) at once; if even that fails the delta refuses every change until reopened.
   */
  async #change(
    ctx: DeltaContext,
    change: (c: LayerChangeContext) => Promise<LayerChangeResult>,
    stackFor: (result: LayerChangeResult) => Promise<FrozenStack & { result: LayerChangeResult }>,
  ): Promise<DeltaContext> {
    // Before the writable layer's files can become a layer's: every writable fd handed out before now
    // must go (the epoch, onLayerChange), and none is handed out until the change is over (the lock).
    this.#epoch++;
    this.onLayerChange?.();
    const c: LayerChangeContext = {
      deltaDir: this.#deltaDir,
      journal: ctx.journal,
      meta: ctx.meta,
      frozen: this.frozenLayers,
      logger: ctx.logger,
    };
    let result: LayerChangeResult;
    try {
      result = await change(c);
    } catch (err) {
      let resumed: LayerChangeResult | null;
      try {
        resumed = await resumeLayerChange(c);
      } catch (fatal) {
        this.#broken = fatal instanceof Error ? fatal : new Error(String(fatal));
        ctx.logger.warn({ err: fatal }, 'a layer change could not be finished: reopen the delta');
        throw err;
      }
      if (resumed === null) throw err; // rolled back: the delta is as it was
      result = resumed;
    }
    let upper: HostDir;
    let views: readonly FrozenView[];
    let top: FrozenStack['top'];
    try {
      // Synchronous: upper/ was just made (HostDir.openNow), where a thread-pool trip can wait
      // milliseconds on a loaded host; so is a checkpoint's frozen view (FrozenView.fromState).
      upper = HostDir.openNow({ path: `${this.#deltaDir}/upper` });
      try {
        ({ views, top } = await stackFor(result));
      } catch (err) {
        // The views stay their caller's to close (a restore closes those it opened); the delta is broken.
        await upper.close();
        throw err;
      }
    } catch (err) {
      // The old context's upper tree is now a frozen layer or gone: it must not take another write.
      this.#broken = err instanceof Error ? err : new Error(String(err));
      throw err;
    }
    // Its cached directory fds go, after the answer (closing a few hundred fds takes milliseconds, and
    // so does issuing the closes: hence setImmediate); a lookup still using them walks again from its
    // root. Closed (at the next change) once they are gone.
    const retiredUpper = ctx.upper;
    const dropped = afterAnswer(() => retiredUpper.invalidateCache()).catch((err: unknown) => {
      ctx.logger.debug({ err }, 'dropping the retired upper tree fds failed');
    });
    const retired = { close: (): Promise<void> => dropped.then(() => retiredUpper.close()) };
    this.#retire([retired, ...this.#stack.views.filter((view) => !views.includes(view))], ctx.logger);
    this.#stack = { views, top };
    return { ...ctx, upper, lower: top, meta: result.meta };
  }

  /**
   * Puts the delta on `to` (a frozen layer merged from the adjacent pair `from`, layer-merge.ts) in their
   * place: what the sandbox sees does not change, nor does the writable layer. One durable write of
   * stack.json is the switch, so a crash leaves the old stack or the new one. False when the stack does
   * not hold the pair (already switched, or never on it).
   */
  async compact(
    ctx: DeltaContext,
    from: readonly [string, string],
    to: string,
  ): Promise<DeltaContext | null> {
    const [lower, upper] = normalizeStack(from);
    const [merged] = normalizeStack([to]) as [string];
    const views = this.#stack.views;
    const at = views.findIndex((view, i) => view.dir === lower && views[i + 1]?.dir === upper);
    if (at < 0) return null;
    checkLayerDirs({ dirs: [merged], deltaDir: this.#deltaDir, codebaseDir: ctx.codebase.path });
    // The layers below stay open; the merged one and every one above it are views over new layers below.
    const kept = views.slice(0, at);
    const fresh: FrozenView[] = [];
    try {
      fresh.push(await FrozenView.open({ dir: merged, below: kept.at(-1) ?? ctx.codebase }));
      for (const above of views.slice(at + 2)) {
        const below = fresh.at(-1) as FrozenView;
        fresh.push(FrozenView.fromState({ dir: above.dir, meta: above.layer.meta, below }));
      }
      await writeStack(
        this.#deltaDir,
        [...kept, ...fresh].map((view) => view.dir),
      );
    } catch (err) {
      await closeViews(fresh);
      throw err;
    }
    // A lookup that started before may still walk the old views: closed at the next change.
    this.#retire(views.slice(at), ctx.logger);
    this.#stack = stackOf(ctx.codebase, [...kept, ...fresh]);
    return { ...ctx, lower: this.#stack.top };
  }

  /**
   * Makes the writable layer alone show what the stack shows and drops the frozen layers (flatten.ts), so
   * that a commit or a partial discard runs as without them. A failure is settled at once (back before the
   * switch, forward after it); if even that fails the delta refuses every change until reopened.
   */
  async flatten(ctx: DeltaContext): Promise<DeltaContext> {
    const views = this.#stack.views;
    if (views.length === 0) return ctx;
    const o = {
      ctx,
      frozen: views.map((view) => view.layer),
      from: this.frozenLayers,
      deltaDir: this.#deltaDir,
    };
    try {
      await flattenStack(o);
    } catch (err) {
      let settled: 'before' | 'after';
      try {
        settled = await settleFlatten(o);
      } catch (fatal) {
        this.#broken = fatal instanceof Error ? fatal : new Error(String(fatal));
        ctx.logger.warn({ err: fatal }, 'a flatten could not be finished: reopen the delta');
        throw err;
      }
      if (settled === 'before') throw err;
    }
    this.#retire([...views], ctx.logger);
    this.#stack = { views: [], top: ctx.codebase };
    return { ...ctx, lower: ctx.codebase };
  }
}
