// Opening a delta directory: its layout (upper/, work/, meta/), the cleanup of interrupted copy-ups, the
// journal replay, and the disk quota's background recount.
import { resolve as absolute } from 'node:path';

import { AgentFenseError } from '@agentfense/protocol';

import { asFsError, FsError } from '../errors.js';
import { HostDir } from '../host/host-dir.js';
import { openPinnedDir } from '../host/pinned-dir.js';
import { CommitJournal } from './commit-journal.js';
import type { DeltaContext } from './context.js';
import { COMPACT_AFTER_RECORDS, MetaJournal, compactAfterBytes } from './journal.js';
import { closeViews, normalizeStack, openFrozenStack, type FrozenStack } from './frozen-stack.js';
import { resumeLayerChange } from './layer-change.js';
import { checkLayerDirs } from './layer-target.js';
import { readIntent, readStack, sameStack, writeStack } from './layer-stack.js';
import { settleFlatten } from './flatten.js';
import type { MetaState } from './meta-state.js';
import { DiskQuota } from './quota.js';
import type { DeltaLogger, DeltaOpenOptions } from './types.js';

const NO_LOG: DeltaLogger = { warn: () => undefined, debug: () => undefined };

/**
 * An opened delta: its context, the host directories that stay for its whole life (the codebase, the
 * delta directory, work/, meta/; not upper/, which a checkpoint replaces), and its frozen layers.
 */
export interface OpenedDelta {
  readonly ctx: DeltaContext;
  readonly hostDirs: readonly HostDir[];
  readonly stack: FrozenStack;
  /** The delta directory, absolute. */
  readonly deltaDir: string;
}

/** Opens (or creates) the delta at `deltaDir` over `lowerDir`, restoring everything a previous worker left. */
export async function openDelta(options: DeltaOpenOptions): Promise<OpenedDelta> {
  const logger = options.logger ?? NO_LOG;
  const deltaDir = absolute(options.deltaDir);
  const opened: HostDir[] = [];
  let upper: HostDir | undefined;
  let stack: FrozenStack | undefined;
  try {
    // The codebase: no symlink in any component of its path, and the directory that was linked.
    const lowerRoot = await openPinnedDir(options.lowerDir, { identity: options.lowerIdentity });
    const codebase = await HostDir.open({
      path: options.lowerDir,
      root: lowerRoot,
      cacheMaxAgeMs: options.lowerCacheMaxAgeMs ?? 2000,
      rememberMissingMs: options.lowerCacheMaxAgeMs ?? 2000,
    });
    opened.push(codebase);
    const root = await HostDir.open({ path: deltaDir, cacheCapacity: 0 });
    opened.push(root);
    for (const sub of ['upper', 'work', 'meta']) {
      if ((await root.lstatOrNull(sub)) === null) await root.mkdir(sub, 0o700);
    }
    const sub = async (name: string): Promise<HostDir> => {
      const dir = await HostDir.open({ path: `${deltaDir}/${name}` });
      opened.push(dir);
      return dir;
    };
    const work = await sub('work');
    const metaDir = await sub('meta');
    // Leftovers of copy-ups interrupted by a crash.
    for (const e of await work.readdir('')) await work.removeTree(e.name);
    const { journal, state: replayed } = await MetaJournal.open({
      dir: metaDir,
      logger,
      compactAfterBytes: compactAfterBytes(options.diskQuotaBytes),
    });
    // A checkpoint or restore a crash interrupted is finished (or rolled back) before anything looks.
    const resumed = await resumeLayerChange({ deltaDir, journal, meta: replayed, frozen: [], logger });
    const state = resumed?.meta ?? replayed;
    if (journal.pending > COMPACT_AFTER_RECORDS) await journal.compact(state);
    upper = await HostDir.open({ path: `${deltaDir}/upper` });
    // A flatten a crash interrupted started from the stack the caller may still name (flatten.ts).
    const intent = await readIntent(deltaDir);
    const flattening = intent?.op === 'flatten' ? intent : null;
    const frozen = await frozenLayers({
      deltaDir,
      given: options.frozen,
      upper,
      state,
      from: flattening?.from,
    });
    checkLayerDirs({ dirs: frozen.dirs, deltaDir, codebaseDir: options.lowerDir });
    stack = await openFrozenStack(codebase, frozen.dirs);
    if (frozen.adopted) await writeStack(deltaDir, frozen.dirs);
    const quota =
      options.diskQuotaBytes === undefined
        ? null
        : new DiskQuota(options.diskQuotaBytes, options.frozenBytes);
    quota?.chargeMetadata(() => journal.diskBytes);
    const owner = options.owner ?? null;
    const commits = new CommitJournal(metaDir);
    let ctx: DeltaContext = {
      lower: stack.top,
      codebase,
      upper,
      work,
      meta: state,
      journal,
      commits,
      logger,
      quota,
      owner,
    };
    if (flattening !== null) {
      const settled = await settleFlatten({
        ctx,
        frozen: stack.views.map((v) => v.layer),
        from: [],
        deltaDir,
      });
      if (settled === 'after') {
        await closeViews(stack.views);
        stack = { views: [], top: codebase };
        ctx = { ...ctx, lower: codebase };
      }
    }
    // Recounted in the background: a huge delta must not hold up the mount (growth waits for it).
    void quota?.rescan(upper, (err) => logger.warn({ err }, 'disk quota: counting the delta failed'));
    return { ctx, hostDirs: opened, stack, deltaDir };
  } catch (err) {
    if (stack !== undefined) await closeViews(stack.views);
    await upper?.close();
    for (const dir of opened) await dir.close();
    // A refused codebase directory keeps its own kind and message (pinned-dir.ts) across the wire.
    if (err instanceof AgentFenseError) throw err;
    throw asFsError(err, 'opening the delta');
  }
}

/**
 * The delta's frozen layers: the recorded stack (meta/stack.json), which the caller's `given` must equal.
 * A new delta (no stack recorded, an empty writable layer) takes the stack it is given instead: a sandbox
 * started from checkpoints, where nothing was made over another stack. Any other change is a restore's.
 */
async function frozenLayers(o: {
  deltaDir: string;
  given: readonly string[] | undefined;
  upper: HostDir;
  state: MetaState;
  /** The stack an interrupted flatten started from: also the caller's to name. */
  from: readonly string[] | undefined;
}): Promise<{ dirs: readonly string[]; adopted: boolean }> {
  const recorded = await readStack(o.deltaDir);
  if (o.given === undefined) return { dirs: recorded, adopted: false };
  const given = normalizeStack(o.given);
  if (sameStack(given, recorded) || (o.from !== undefined && sameStack(given, o.from)))
    return { dirs: recorded, adopted: false };
  // Recorded once the layers opened (the caller).
  if (recorded.length === 0 && o.state.empty && !(await o.upper.hasEntries(''))) {
    return { dirs: given, adopted: true };
  }
  throw new FsError(
    'EINVAL',
    `the delta ${o.deltaDir} was made over the frozen layers [${recorded.join(', ')}], ` +
      `not the ones given [${given.join(', ')}]`,
  );
}
