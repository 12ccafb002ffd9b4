// Commit: applying a delta's changes to the codebase, atomically per file, with conflict detection, as a
// journalled operation that a crash at any moment leaves finished or to be finished (commit-journal.ts).
import type { BigIntStats } from 'node:fs';
import { constants } from 'node:fs';
import fsp from 'node:fs/promises';

import type { ChangeEntry, CommitConflict, CommitNote } from '@agentfense/protocol';

import { fdPath } from '../host/flags.js';
import { relJoin, relParent } from '../host/rel-path.js';
import { Yielder } from '../host/yielder.js';
import { AppliedBatch } from './commit-batch.js';
import { newCommitId } from './commit-journal.js';
import { SET_ID, commitTempPath, inDoubtVerdict, removeLeftoverTemps } from './commit-resume.js';
import { computeChanges, type DeltaChange } from './changes.js';
import type { DeltaContext } from './context.js';
import { baseMismatch } from './identity.js';
import { selected } from './paths.js';
import type { CommitOptions, DeltaCommitResult } from './types.js';

export { commitTempName } from './commit-resume.js';

/** A change that cannot be applied; it stays in the delta and is reported as a conflict. */
class Refused extends Error {}

/**
 * Applies the selected changes: deletions deepest first, then adds/modifications parents first. Each file
 * is written to a temp name in its codebase directory and renamed over the old one; parent directories are
 * created as needed. Nothing in the codebase is followed: a path whose codebase ancestor is a symlink (or
 * not a directory) is refused in every mode. In 'detect-conflicts' mode a change whose codebase entry no
 * longer matches its base record is refused too. Refused changes stay in the delta.
 * Device nodes, FIFOs and sockets are never synced back: reported as skipped, kept in the delta. Set-id
 * bits are never written to the codebase: such files are written without them and reported as changed.
 *
 * Journalled (commit-journal.ts): before its first write into the codebase the commit records, fsynced,
 * which changes it applies; applied changes leave the delta in batches once they are durable in the
 * codebase (commit-batch.ts); the record goes when the commit has run to its end, conflicts included. A
 * commit that finds an unfinished one first takes over its changes (whatever `paths` says) and its
 * temporary files, and finishes them in the mode asked for now: a change it finds already done in the
 * codebase counts as applied (commit-resume.ts). An interrupted commit (`signal`) keeps its record.
 */
export async function commitChanges(ctx: DeltaContext, options: CommitOptions): Promise<DeltaCommitResult> {
  // Walk the codebase afresh: a cached directory fd could name a directory someone moved since.
  await ctx.codebase.invalidateCache();
  const unfinished = await ctx.commits.pending();
  const yielder = new Yielder();
  // What it may have left half-written: a temporary file next to any change it listed.
  if (unfinished !== null) await removeLeftoverTemps(ctx, unfinished.paths, unfinished.id, yielder);
  const inDoubt = new Set(unfinished?.paths);
  const all = (await computeChanges(ctx)).filter((c) => inDoubt.has(c.rel) || selected(c.rel, options.paths));
  const applied: ChangeEntry[] = [];
  const conflicts: CommitConflict[] = [];
  const skipped: CommitNote[] = [];
  const changed: CommitNote[] = [];
  if (all.length === 0) {
    if (unfinished !== null) await ctx.commits.finish(); // everything it listed was applied or discarded
    return { applied, conflicts, skipped, changed };
  }
  const id = unfinished?.id ?? newCommitId();
  await ctx.commits.begin({ id, mode: options.mode, paths: all.map((c) => c.rel) });
  const deletions = all.filter((c) => c.entry.kind === 'deleted').sort((a, b) => depth(b.rel) - depth(a.rel));
  const writes = all.filter((c) => c.entry.kind !== 'deleted');
  const batch = new AppliedBatch(ctx);
  let interrupted: string | undefined;
  for (const change of [...deletions, ...writes]) {
    // Between two changes, never inside one: each file lands whole (temp name, then rename) or not at all.
    await yielder.maybe();
    if (options.signal?.aborted === true) {
      interrupted = stopReason(options.signal);
      break;
    }
    if (change.upperType === 'fifo' || change.upperType === 'other') {
      skipped.push({ path: change.entry.path, reason: await skipReason(ctx, change.rel) });
      continue;
    }
    try {
      const stripped = await applyChange(ctx, change, {
        lastWriterWins: options.mode === 'last-writer-wins',
        id,
        inDoubt: inDoubt.has(change.rel),
      });
      if (stripped !== null) changed.push({ path: change.entry.path, reason: stripped });
      await batch.add(change);
      applied.push(change.entry);
    } catch (err) {
      if (!(err instanceof Refused) && !isFsRefusal(err)) throw err;
      ctx.logger.debug({ path: change.entry.path, err }, 'commit refused a change');
      conflicts.push({ path: change.entry.path, reason: err instanceof Error ? err.message : String(err) });
    }
  }
  await batch.flush();
  await pruneUpperDirs(ctx, '', yielder);
  if (interrupted === undefined) await ctx.commits.finish();
  return { applied, conflicts, skipped, changed, ...(interrupted === undefined ? {} : { interrupted }) };
}

/** Why an entry is not committed (what it is: devices, FIFOs and sockets have no place in a codebase). */
async function skipReason(ctx: DeltaContext, rel: string): Promise<string> {
  const st = await ctx.upper.lstatOrNull(rel);
  const what =
    st === null
      ? 'special file'
      : st.isCharacterDevice()
        ? 'character device'
        : st.isBlockDevice()
          ? 'block device'
          : st.isFIFO()
            ? 'FIFO'
            : st.isSocket()
              ? 'socket'
              : 'special file';
  return `${what}: never written to the codebase (kept in the sandbox)`;
}

/** How one change is applied. */
interface ApplyOptions {
  readonly lastWriterWins: boolean;
  /** The commit's id (its temporary names). */
  readonly id: string;
  /** Listed by an unfinished commit: it may be done or half done in the codebase already. */
  readonly inDoubt: boolean;
}

/**
 * Applies one change; returns a note when the file was written with set-id bits removed, else null.
 */
async function applyChange(
  ctx: DeltaContext,
  change: DeltaChange,
  { lastWriterWins, id, inDoubt }: ApplyOptions,
): Promise<string | null> {
  const { rel } = change;
  // A deletion the unfinished commit may have done already: a codebase ancestor that is no directory by
  // now (the commit put a file where that directory was) means the entry is gone; nothing is followed.
  const now = await codebaseStat(ctx, rel, { goneBelowNonDir: inDoubt && change.upperType === null });
  const upperSt = change.upperType === null ? null : await ctx.upper.lstat(rel);
  // Never set-id bits in the codebase (a sandbox must not plant a set-uid program there): the entry is
  // written without them and the commit result says so.
  const mode = upperSt === null ? 0 : Number(upperSt.mode) & 0o7777;
  const stripped =
    (mode & SET_ID) === 0 || change.upperType === 'symlink'
      ? null
      : `set-uid/set-gid bits removed (mode ${mode.toString(8)} written as ${(mode & ~SET_ID).toString(8)})`;
  if (!lastWriterWins && change.base !== undefined) {
    const reason = baseMismatch(change.base, now);
    if (reason !== null) {
      const verdict = inDoubt ? await inDoubtVerdict(ctx, change, now) : 'conflict';
      if (verdict === 'done') return stripped;
      if (verdict === 'conflict') throw new Refused(reason);
    }
  }
  if (upperSt === null) {
    await removeFromCodebase(ctx, rel, now, lastWriterWins);
    return null;
  }
  await ensureCodebaseDir(ctx, relParent(rel));
  if (change.upperType === 'directory') {
    if (now !== null && !now.isDirectory()) await removeFromCodebase(ctx, rel, now, lastWriterWins);
    if (now === null || !now.isDirectory()) await ctx.codebase.mkdir(rel, 0o700);
    await ctx.codebase.chmod(rel, mode & ~SET_ID);
    return stripped;
  }
  const tmp = commitTempPath(rel, id);
  try {
    if (change.upperType === 'symlink') {
      await ctx.codebase.symlink(await ctx.upper.readlink(rel), tmp);
    } else {
      await copyToCodebase(ctx, rel, tmp, now ?? (await ctx.codebase.lstat(relParent(rel))));
      await ctx.codebase.chmod(tmp, mode & ~SET_ID);
    }
    await ctx.codebase.utimes(tmp, upperSt.atimeNs, upperSt.mtimeNs);
    if (now?.isDirectory() === true) await removeFromCodebase(ctx, rel, now, lastWriterWins);
    await ctx.codebase.rename(tmp, { dir: ctx.codebase, rel });
  } catch (err) {
    await ctx.codebase.removeTree(tmp);
    throw err;
  }
  return stripped;
}

/** Copies the upper file's content into a new codebase file owned like `owner` (the old file or the dir). */
async function copyToCodebase(
  ctx: DeltaContext,
  rel: string,
  tmp: string,
  owner: BigIntStats,
): Promise<void> {
  const dst = await ctx.codebase.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    const src = await ctx.upper.open(rel, constants.O_RDONLY);
    try {
      // Magic links of fds opened O_NOFOLLOW: the kernel copy reopens exactly those two inodes.
      await fsp.copyFile(fdPath(src.fd), fdPath(dst.fd));
    } finally {
      await src.close();
    }
    await dst.chown(Number(owner.uid), Number(owner.gid));
  } finally {
    await dst.close();
  }
}

/**
 * lstat of the codebase entry; a symlink or non-directory among its ancestors refuses the change, or with
 * `goneBelowNonDir` means there is no entry (null).
 */
async function codebaseStat(
  ctx: DeltaContext,
  rel: string,
  { goneBelowNonDir = false } = {},
): Promise<BigIntStats | null> {
  try {
    return await ctx.codebase.lstat(rel);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ENOTDIR' || code === 'ELOOP') {
      if (goneBelowNonDir) return null;
      throw new Refused('a directory on the codebase path is a symlink or not a directory');
    }
    throw err;
  }
}

/** Creates the codebase directory `rel` and its missing parents with the upper directories' modes. */
async function ensureCodebaseDir(ctx: DeltaContext, rel: string): Promise<void> {
  if (rel === '') return;
  const now = await codebaseStat(ctx, rel);
  if (now !== null) {
    if (!now.isDirectory()) throw new Refused(`codebase entry /${rel} is a symlink or not a directory`);
    return;
  }
  await ensureCodebaseDir(ctx, relParent(rel));
  const up = await ctx.upper.lstatOrNull(rel);
  await ctx.codebase.mkdir(rel, 0o700);
  await ctx.codebase.chmod(rel, up === null ? 0o755 : Number(up.mode));
}

/** Deletes a codebase entry; a directory with entries the sandbox never saw is refused unless LWW. */
async function removeFromCodebase(
  ctx: DeltaContext,
  rel: string,
  now: BigIntStats | null,
  lastWriterWins: boolean,
): Promise<void> {
  // Already gone: the deletion is idempotent, nobody's work is lost.
  if (now === null) return;
  if (!now.isDirectory()) {
    await ctx.codebase.unlink(rel);
    return;
  }
  try {
    await ctx.codebase.rmdir(rel);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOTEMPTY') throw err;
    if (!lastWriterWins) throw new Refused('directory has entries in the codebase the sandbox never saw');
    await ctx.codebase.removeTree(rel);
  }
}

/** Removes upper directories left empty and unrecorded (structure whose content was committed). */
async function pruneUpperDirs(ctx: DeltaContext, rel: string, yielder: Yielder): Promise<boolean> {
  let empty = true;
  for (const e of await ctx.upper.readdir(rel)) {
    await yielder.maybe();
    const child = relJoin(rel, e.name);
    if (e.type === 'directory' && (await pruneUpperDirs(ctx, child, yielder))) {
      await ctx.upper.rmdir(child);
    } else {
      empty = false;
    }
  }
  return empty && !ctx.meta.hasBase(rel) && !ctx.meta.isWhiteout(rel);
}

/** Filesystem errors that mean "this change cannot go in" rather than a broken worker. */
function isFsRefusal(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return (
    code === 'EEXIST' || code === 'ENOTEMPTY' || code === 'EISDIR' || code === 'ENOTDIR' || code === 'ELOOP'
  );
}

function depth(rel: string): number {
  let n = 0;
  for (const ch of rel) if (ch === '/') n++;
  return n;
}

function stopReason(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : 'stopped';
}
