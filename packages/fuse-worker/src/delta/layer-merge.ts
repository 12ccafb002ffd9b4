// Building one frozen layer that shows exactly what two adjacent frozen layers show together (a stack's
// background compaction). The two layers are only read; the merged one is built under `<merged>.tmp`
// and renamed into place whole, so `<merged>` exists only complete. Every host step goes through
// `mergeFs`, so a test can make the build "die" before any of them.
import type { BigIntStats } from 'node:fs';
import { lstatSync } from 'node:fs';
import { join } from 'node:path';

import { HostDir } from '../host/host-dir.js';
import { Yielder } from '../host/yielder.js';
import type { LayerView } from './context.js';
import { readFrozenMeta, FROZEN_MARKER } from './frozen-view.js';
import { writeSnapshotFile } from './journal.js';
import { layerBytes } from './layer-bytes.js';
import { layerFs } from './layer-fs.js';
import { planStack } from './stack-plan.js';

/** The host steps of a merge (a test replaces one to stop the build there). */
export const mergeFs = {
  /** An empty directory of the merged tree (its owner, mode and times are set once it is filled). */
  mkdir(to: HostDir, rel: string): Promise<void> {
    return to.mkdir(rel, 0o700);
  },
  /** Another name for an entry of a source layer: the same inode, so content, mode and times stay. */
  link(from: HostDir, rel: string, to: HostDir): Promise<void> {
    return from.link(rel, { dir: to, rel });
  },
  /** A directory's owner, mode and times, as the source layer has them. */
  async finishDir(to: HostDir, rel: string, st: BigIntStats): Promise<void> {
    const made = await to.lstat(rel);
    if (made.uid !== st.uid || made.gid !== st.gid) await to.lchown(rel, Number(st.uid), Number(st.gid));
    await to.chmod(rel, Number(st.mode) & 0o7777);
    await to.utimes(rel, st.atimeNs, st.mtimeNs);
  },
  /** The metadata: the merged snapshot (fsynced) and the frozen marker. */
  async writeMeta(metaDir: string, plan: Awaited<ReturnType<typeof planStack>>): Promise<void> {
    writeSnapshotFile(join(metaDir, 'snapshot.json'), plan.meta, 0);
    await layerFs.createEmpty(join(metaDir, FROZEN_MARKER));
    await layerFs.fsyncDir(metaDir);
  },
  /** The merged layer appears whole: one rename. */
  place(tmp: string, merged: string): Promise<void> {
    return layerFs.rename(tmp, merged);
  },
};

/**
 * Makes the frozen layer `merged` that shows over any layer what `upper` over `lower` shows there (both
 * frozen layers, `upper` directly above `lower` in every stack that holds them): upper entries of either
 * that the pair shows (hard links: the same inodes, nothing copied), every whiteout of both, and for each
 * path the lower layer's base if it has one (as stack-plan.ts puts a stack in one delta's terms). Nothing
 * follows a symlink (HostDir, link(2) without AT_SYMLINK_FOLLOW). A `merged` that exists is complete and
 * kept; a `<merged>.tmp` left by a cut-short build is removed first. Returns its bytes in the quota's
 * measure.
 */
export async function mergeLayers(o: {
  readonly lower: string;
  readonly upper: string;
  readonly merged: string;
}): Promise<{ bytes: number }> {
  if (lstatSync(o.merged, { throwIfNoEntry: false }) !== undefined)
    return { bytes: await layerBytes(o.merged) };
  const tmp = `${o.merged}.tmp`;
  await layerFs.remove(tmp);
  await layerFs.mkdir(tmp);
  await layerFs.mkdir(join(tmp, 'upper'));
  await layerFs.mkdir(join(tmp, 'meta'));
  const views: LayerView[] = [];
  const to = await HostDir.open({ path: join(tmp, 'upper') });
  try {
    for (const dir of [o.lower, o.upper]) {
      const meta = await readFrozenMeta(dir);
      const upper = await HostDir.open({ path: join(dir, 'upper') });
      views.push({ upper, meta, lower: upper });
    }
    const plan = await planStack(views);
    const yielder = new Yielder();
    const dirs: { rel: string; st: BigIntStats }[] = [];
    for (const entry of plan.entries.values()) {
      await yielder.maybe();
      if (entry.st.isDirectory()) {
        await mergeFs.mkdir(to, entry.rel);
        dirs.push(entry);
      } else {
        await mergeFs.link((views[entry.layer] as LayerView).upper, entry.rel, to);
      }
    }
    // Deepest first: filling a directory moves its times, and a read-only mode would stop the filling.
    for (const { rel, st } of dirs.reverse()) await mergeFs.finishDir(to, rel, st);
    await mergeFs.writeMeta(join(tmp, 'meta'), plan);
  } finally {
    await to.close();
    for (const view of views) await view.upper.close();
  }
  await mergeFs.place(tmp, o.merged);
  return { bytes: await layerBytes(o.merged) };
}

/** Removes what a cut-short build left (`<merged>.tmp`); the merged layer itself, if complete, stays. */
export async function removeMergeLeftover(merged: string): Promise<void> {
  await layerFs.remove(`${merged}.tmp`);
}
