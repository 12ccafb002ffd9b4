// Applied changes leave the delta in batches, each once its files are on stable storage in the codebase:
// the sandbox's copy is the only other one, and dropping it before the codebase's copy is durable would
// let a power cut lose both (a renamed-in new file can come back empty). One syncfs per batch instead of
// an fsync per file (host/sync-fs.ts has the figures). A change applied but not yet forgotten when the
// process dies stays in the delta; the next commit finds it done in the codebase (commit-resume.ts).
import type { MetaRecord } from './meta-state.js';
import { syncFilesystem } from '../host/sync-fs.js';
import type { DeltaChange } from './changes.js';
import type { DeltaContext } from './context.js';

/** A batch is flushed once this old (ms): a long commit hands back its files as it goes. */
export const FLUSH_EVERY_MS = 2000;
/** ... or once it holds this many changes (bounds what a retry must check in the codebase). */
export const FLUSH_EVERY_CHANGES = 10_000;

/** Changes applied to the codebase and still held by the delta. */
export class AppliedBatch {
  readonly #ctx: DeltaContext;
  #changes: DeltaChange[] = [];
  #since = performance.now();
  #noSyncLogged = false;

  constructor(ctx: DeltaContext) {
    this.#ctx = ctx;
  }

  /** Adds an applied change; flushes when the batch is due. */
  async add(change: DeltaChange): Promise<void> {
    if (this.#changes.length === 0) this.#since = performance.now();
    this.#changes.push(change);
    if (this.#changes.length >= FLUSH_EVERY_CHANGES || performance.now() - this.#since >= FLUSH_EVERY_MS)
      await this.flush();
  }

  /** Makes the batch durable in the codebase, then drops it from the delta: records first, upper entries after. */
  async flush(): Promise<void> {
    const changes = this.#changes;
    if (changes.length === 0) return;
    const ctx = this.#ctx;
    if (!(await syncFilesystem(ctx.codebase.path)) && !this.#noSyncLogged) {
      this.#noSyncLogged = true;
      ctx.logger.warn(
        {},
        'commit: no `sync` executable on the host; committed files are not flushed to disk',
      );
    }
    this.#changes = [];
    const records: MetaRecord[] = changes.map((c) => ({ op: 'forget', path: c.rel, subtree: false }));
    // One write(2) for the batch; a crash before the upper entries go only makes them look uncommitted.
    ctx.journal.record(records);
    for (const change of changes) {
      if (change.upperType !== null && change.upperType !== 'directory') await ctx.upper.unlink(change.rel);
    }
  }
}
