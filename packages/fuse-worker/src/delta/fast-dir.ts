// Which directories the binding may answer LOOKUP misses in (fs/native-lookups.ts): those only the
// writable layer holds. Nothing of the codebase is at or below one (its base is an add, no whiteout below
// it, not hidden) and no frozen layer lies between, so a name its upper directory lacks is missing from the
// merged view, as long as the codebase still lacks the directory (the binding checks that at each answer).
import { fstatSync, lstatSync } from 'node:fs';
import { join } from 'node:path';
import { relParent } from '../host/rel-path.js';
import type { DeltaContext } from './context.js';
import { ABSENT } from './identity.js';
import type { MetaRecord } from './meta-state.js';
import { toRel } from './paths.js';
import { isAddedDir } from './records.js';

export interface FastDir {
  /** The writable layer's root: the binding opens `rel` beneath it, following no symlink. */
  readonly upperRootFd: number;
  readonly rel: string;
  /**
   * Whether the writable layer's filesystem counts subdirectories in a directory's st_nlink, so the
   * directory's own st_nlink is the link count the worker shows (nothing below it is hidden or in the
   * codebase): the binding may then answer its GETATTRs from an fstat (fs/native-lookups.ts).
   */
  readonly hostLinks: boolean;
}

export function fastDirOf(ctx: DeltaContext, path: string): FastDir | null {
  if (ctx.lower !== ctx.codebase) return null; // frozen layers: their whiteouts and adds are not checked
  const rel = toRel(path);
  if (rel === '' || !isAddedDir(ctx, rel)) return null;
  return { upperRootFd: ctx.upper.rootFd, rel, hostLinks: ctx.upper.nlinkCountsSubdirs };
}

/**
 * What the binding's create and unlink fast paths (fs/native-creates.ts, fs/native-unlinks.ts) need of the
 * delta: the journal they append records to, and the bookkeeping of each file made or removed there, in
 * the turn it is reported.
 */
export interface FastCreateSink {
  /** Hears the journal's fd now and whenever it changes (-1: closed). */
  watchJournal(listener: (fd: number) => void, unadopted: () => number): void;
  /**
   * The binding appended the add record of `path` (`journalBytes`, 0: none) and, when `fd` is not -1,
   * made the file there (open on `fd`): the record joins the state, file and directory join the quota.
   */
  created(path: string, fd: number, journalBytes: number): void;
  /**
   * The binding appended the removal record (`unbase`) of `path` (`journalBytes`, 0: none) and, when
   * `hostIno` is set, removed the file there (its last link): the record joins the state, the quota lets
   * the inode go.
   */
  unlinked(path: string, hostIno: number | undefined, journalBytes: number): void;
  /**
   * The binding appended the removal record (`unbase`) of directory `path` (`journalBytes`, 0: none; with
   * `restored`, the add's record again after it) and, when `hostIno` is set, removed the directory there:
   * the records join the state, the quota lets the inode go, cached fds of the directory are dropped.
   */
  removedDir(path: string, hostIno: number | undefined, journalBytes: number, restored: boolean): void;
}

export function fastCreateSink(ctx: () => DeltaContext): FastCreateSink {
  return {
    watchJournal: (listener, unadopted) => {
      ctx().journal.unadopted = unadopted;
      ctx().journal.watchFd(listener);
    },
    created: (path, fd, journalBytes) => {
      const c = ctx();
      const rel = toRel(path);
      c.upper.changedOutside(); // the delta may remember the name as absent (a LOOKUP before the create)
      if (journalBytes > 0) c.journal.adopt([{ op: 'base', path: rel, base: ABSENT }], journalBytes);
      if (fd === -1 || c.quota === null) return;
      c.quota.record(fstatSync(fd, { bigint: true }));
      const dir = relParent(rel);
      // the directory grew with the name (chargeDir's count, without the thread pool)
      const cached = c.upper.lstatIfCached(dir);
      const st = cached === undefined ? lstatSync(join(c.upper.path, dir), { bigint: true }) : cached;
      if (st !== null) c.quota.record(st);
    },
    unlinked: (path, hostIno, journalBytes) => {
      const c = ctx();
      c.upper.changedOutside(); // the delta may hold the name's lstat
      if (journalBytes > 0) c.journal.adopt([{ op: 'unbase', path: toRel(path) }], journalBytes);
      if (hostIno !== undefined) c.quota?.release(BigInt(hostIno)); // releaseUpper: one link, so the last
    },
    removedDir: (path, hostIno, journalBytes, restored) => {
      const c = ctx();
      const rel = toRel(path);
      c.upper.changedOutside();
      const records: MetaRecord[] = [{ op: 'unbase', path: rel }];
      if (restored) records.push({ op: 'base', path: rel, base: ABSENT });
      if (journalBytes > 0) c.journal.adopt(records, journalBytes);
      if (hostIno === undefined) return;
      c.quota?.release(BigInt(hostIno)); // releaseUpper: a directory's inode goes with its one name
      // upper.rmdir's invalidation: the entries go at once, their fds close when no one holds them
      c.upper.removedOutside(rel).catch(() => undefined);
    },
  };
}
