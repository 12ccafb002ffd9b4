// Discard: the sandbox's changes at some paths (or all of them) dropped. It is also the way out of a full
// filesystem (the delta lives on the data directory's), so nothing it must do before removing files may
// need room there.
import { isNoSpace } from '../errors.js';
import { Yielder } from '../host/yielder.js';
import { abandonUnfinishedCommit } from './commit-resume.js';
import type { DeltaContext } from './context.js';
import type { MetaRecord } from './meta-state.js';
import { toRel } from './paths.js';
import { record } from './records.js';

/** Forgets what is recorded at each of `paths` and removes the sandbox's own entries there. */
export async function discardPaths(ctx: DeltaContext, paths: readonly string[]): Promise<void> {
  for (const path of paths) {
    const rel = toRel(path);
    // Nothing of an unfinished commit is left to finish once everything goes (its temporary files first).
    if (rel === '') await abandonUnfinishedCommit(ctx, new Yielder());
    const forget: MetaRecord[] = [{ op: 'forget', path: rel, subtree: true }];
    // The record goes first: a crash after it leaves entries of ours without metadata, shown as they are,
    // and discarding again removes them. When the filesystem is full it cannot be written before the
    // removal has freed room, so it follows the removal then: a crash in between leaves the sandbox's
    // deletions of codebase entries (whiteouts) with its own files gone, and discarding again ends it.
    const recorded = await record(ctx, forget).then(
      () => true,
      (err: unknown) => {
        if (!isNoSpace(err)) throw err;
        return false;
      },
    );
    await removeUpper(ctx, rel);
    if (!recorded) await record(ctx, forget);
  }
  // Compaction only shortens the journal, which already holds the records: with no room for its snapshot
  // the journal stays as it is until the next compaction (at the next open or commit).
  await ctx.journal.compact(ctx.meta).catch((err: unknown) => {
    if (!isNoSpace(err)) throw err;
    ctx.logger.warn({ err }, 'no room to compact the delta journal after a discard; it is kept as it is');
  });
}

async function removeUpper(ctx: DeltaContext, rel: string): Promise<void> {
  if (rel === '') {
    for (const e of await ctx.upper.readdir('')) await ctx.upper.removeTree(e.name);
    return;
  }
  await ctx.upper.removeTree(rel).catch((err: unknown) => {
    // An ancestor that is not a directory in the upper layer: nothing of ours is below it.
    if ((err as NodeJS.ErrnoException).code !== 'ENOTDIR') throw err;
  });
}
