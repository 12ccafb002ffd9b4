// Opening a delta directory: its layout (upper/, work/, meta/), the cleanup of interrupted copy-ups, the
// journal replay, and the disk quota's background recount.
import { AgentFenseError } from '@agentfense/protocol';

import { asFsError } from '../errors.js';
import { HostDir } from '../host/host-dir.js';
import { openPinnedDir } from '../host/pinned-dir.js';
import { CommitJournal } from './commit-journal.js';
import type { DeltaContext } from './context.js';
import { COMPACT_AFTER_RECORDS, MetaJournal, compactAfterBytes } from './journal.js';
import { DiskQuota } from './quota.js';
import type { DeltaLogger, DeltaOpenOptions } from './types.js';

const NO_LOG: DeltaLogger = { warn: () => undefined, debug: () => undefined };

/** An opened delta: its context and every host directory to close with it. */
export interface OpenedDelta {
  readonly ctx: DeltaContext;
  readonly hostDirs: readonly HostDir[];
}

/** Opens (or creates) the delta at `deltaDir` over `lowerDir`, restoring everything a previous worker left. */
export async function openDelta(options: DeltaOpenOptions): Promise<OpenedDelta> {
  const logger = options.logger ?? NO_LOG;
  const opened: HostDir[] = [];
  try {
    // The codebase: no symlink in any component of its path, and the directory that was linked.
    const lowerRoot = await openPinnedDir(options.lowerDir, { identity: options.lowerIdentity });
    const lower = await HostDir.open({
      path: options.lowerDir,
      root: lowerRoot,
      cacheMaxAgeMs: options.lowerCacheMaxAgeMs ?? 2000,
      rememberMissingMs: options.lowerCacheMaxAgeMs ?? 2000,
    });
    opened.push(lower);
    const root = await HostDir.open({ path: options.deltaDir, cacheCapacity: 0 });
    opened.push(root);
    for (const sub of ['upper', 'work', 'meta']) {
      if ((await root.lstatOrNull(sub)) === null) await root.mkdir(sub, 0o700);
    }
    const sub = async (name: string): Promise<HostDir> => {
      const dir = await HostDir.open({ path: `${options.deltaDir}/${name}` });
      opened.push(dir);
      return dir;
    };
    const upper = await sub('upper');
    const work = await sub('work');
    const metaDir = await sub('meta');
    // Leftovers of copy-ups interrupted by a crash.
    for (const e of await work.readdir('')) await work.removeTree(e.name);
    const { journal, state } = await MetaJournal.open({
      dir: metaDir,
      logger,
      compactAfterBytes: compactAfterBytes(options.diskQuotaBytes),
    });
    if (journal.pending > COMPACT_AFTER_RECORDS) await journal.compact(state);
    const quota = options.diskQuotaBytes === undefined ? null : new DiskQuota(options.diskQuotaBytes);
    quota?.chargeMetadata(() => journal.diskBytes);
    const owner = options.owner ?? null;
    const commits = new CommitJournal(metaDir);
    const ctx: DeltaContext = {
      lower,
      codebase: lower,
      upper,
      work,
      meta: state,
      journal,
      commits,
      logger,
      quota,
      owner,
    };
    // Recounted in the background: a huge delta must not hold up the mount (growth waits for it).
    void quota?.rescan(upper, (err) => logger.warn({ err }, 'disk quota: counting the delta failed'));
    return { ctx, hostDirs: opened };
  } catch (err) {
    for (const dir of opened) await dir.close();
    // A refused codebase directory keeps its own kind and message (pinned-dir.ts) across the wire.
    if (err instanceof AgentFenseError) throw err;
    throw asFsError(err, 'opening the delta');
  }
}
