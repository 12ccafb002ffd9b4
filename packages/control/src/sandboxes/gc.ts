// `agentfense gc` (and a safe subset when `serve` starts): removes what nothing refers to any more, and
// says what it removed (docs/decisions.md "Garbage collection lists what it might remove before it reads the
// records" has the policy):
//   - one-shot sandboxes (`run` without --keep) whose process is gone: `run` would have removed them;
//   - sandboxes whose destroy failed (ERROR, "destroy failed: …"): the destroy is retried;
//   - sandbox directories without a record (a destroy interrupted between its steps) and mounts under the
//     sandboxes directory whose sandbox has no record or no live owner;
//   - destroyed sandboxes' directories left in the trash by a process that died while removing them;
//   - linked codebase records no sandbox references (never the linked directory itself), unless
//     `codebases: false`;
//   - what runtimes keep outside sandboxes and whose owner process is gone (docker's pooled containers);
//   - stopped sandboxes (kept by `run --keep`, or stopped by hand) only when older than
//     `stoppedOlderThanMs`; otherwise they are listed as kept, so they never pile up unseen.
// Never a sandbox whose commit is unfinished (pending-commit.ts), nor the directory of one: they are
// listed as such, for their user to finish or give up.
// Workers talk over a socketpair on fd 3: there are no worker socket files to collect.
import { readdir, rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import { listMounts } from '@agentfense/fuse-worker';
import { NotFoundError, WrongStateError } from '@agentfense/protocol';
import type { CodebaseService } from '../codebases/service.js';
import { ID_PREFIXES, validateId } from '../ids.js';
import type { DataLayout } from '../paths.js';
import type { RuntimeRegistry } from './runtimes.js';
import type { SandboxRow, SandboxStore } from '../store/sandboxes.js';
import { DESTROY_FAILED } from './recovery.js';
import type { SandboxManager } from './manager.js';
import { SPARE_LABEL, isOneShot } from './one-shot.js';
import { unfinishedCommit } from './pending-commit.js';
import { isSameProcess } from './process-identity.js';

export interface GcOptions {
  /** Report what would be removed, remove nothing. */
  readonly dryRun?: boolean;
  /** Also remove unreferenced linked codebase records (default true; `serve` passes false). */
  readonly codebases?: boolean;
  /** Also destroy STOPPED sandboxes stopped longer ago than this (ms); default: only report them. */
  readonly stoppedOlderThanMs?: number;
}

export interface GcReport {
  readonly dryRun: boolean;
  /** Sandboxes destroyed (or that would be), with why. */
  readonly sandboxes: { id: string; state: string; reason: string }[];
  /** Sandbox directories without a record, and destroyed ones left in the trash, removed. */
  readonly directories: string[];
  /** Mount points cleared. */
  readonly mounts: string[];
  /** What runtimes removed of dead processes (docker: pooled containers), one description each. */
  readonly runtimes: string[];
  /** Linked codebase records removed (the directories themselves are never touched). */
  readonly codebases: { id: string; path: string }[];
  /** Stopped sandboxes left in place (name them with `sandbox destroy`, or gc --stopped-older-than). */
  readonly kept: { id: string; state: string; stoppedAt: string | null }[];
  /** Sandboxes left in place because their commit is unfinished (`sandbox commit` or `sandbox discard`). */
  readonly unfinished: { id: string; state: string }[];
  /** What could not be removed, and why. */
  readonly errors: { what: string; error: string }[];
}

export interface GcDeps {
  readonly layout: DataLayout;
  readonly store: SandboxStore;
  readonly sandboxes: SandboxManager;
  readonly codebases: CodebaseService;
  readonly runtimes: RuntimeRegistry;
  readonly logger: Logger;
}

const SANDBOX_DIR = new RegExp(`^${ID_PREFIXES.sandbox}_`);

/** Owned by a process that is still alive (this one included): never touched. */
function hasLiveOwner(row: SandboxRow): boolean {
  return isSameProcess(row.owner_pid, row.owner_start);
}

export async function collectGarbage(deps: GcDeps, options: GcOptions = {}): Promise<GcReport> {
  const dryRun = options.dryRun === true;
  const report: GcReport = {
    dryRun,
    sandboxes: [],
    directories: [],
    mounts: [],
    runtimes: [],
    codebases: [],
    kept: [],
    unfinished: [],
    errors: [],
  };
  const fail = (what: string, err: unknown): void => {
    report.errors.push({ what, error: (err as Error).message });
    deps.logger.warn({ err, what }, 'gc could not remove something');
  };
  const now = Date.now();

  // 1. Sandboxes nobody will use again.
  for (const row of await deps.store.all()) {
    if (hasLiveOwner(row)) continue;
    if ((await unfinishedCommit(deps.layout, row.id, deps.logger)) !== null) {
      report.unfinished.push({ id: row.id, state: row.state });
      continue;
    }
    let reason: string | undefined;
    if (isOneShot(row.labels))
      reason =
        row.labels[SPARE_LABEL] === 'true'
          ? 'spare sandbox of a process that ended without removing it'
          : 'one-shot sandbox of a run that ended without removing it';
    else if (row.state === 'ERROR' && row.state_reason?.startsWith(DESTROY_FAILED) === true)
      reason = 'retrying a destroy that failed';
    else if (row.state === 'STOPPED') {
      const stoppedAt = row.stopped_at ?? row.updated_at;
      if (options.stoppedOlderThanMs !== undefined && stoppedAt <= now - options.stoppedOlderThanMs) {
        reason = `stopped since ${new Date(stoppedAt).toISOString()}`;
      } else {
        report.kept.push({
          id: row.id,
          state: row.state,
          stoppedAt: row.stopped_at === null ? null : new Date(row.stopped_at).toISOString(),
        });
      }
    }
    if (reason === undefined) continue;
    if (!dryRun) {
      try {
        await deps.sandboxes.destroy(row.id);
      } catch (err) {
        if (err instanceof NotFoundError) continue; // removed meanwhile by its owner
        if (err instanceof WrongStateError) continue; // claimed meanwhile by a live process
        fail(`sandbox ${row.id}`, err);
        continue;
      }
    }
    report.sandboxes.push({ id: row.id, state: row.state, reason });
  }

  // 2. Mounts under the sandboxes directory that no live sandbox holds. The mounts are listed before the
  // records are read: a sandbox's record exists before any of its mounts, so a sandbox another process
  // creates meanwhile is always found (records read first could miss it and take its mounts for orphans).
  const prefix = `${deps.layout.sandboxesDir}/`;
  const mounts = await listMounts();
  const known = new Map((await deps.store.all()).map((r) => [r.id, r]));
  const mountedIds = new Set<string>();
  for (const mount of mounts) {
    if (!mount.mountpoint.startsWith(prefix)) continue;
    const id = mount.mountpoint.slice(prefix.length).split('/')[0] ?? '';
    const row = known.get(id);
    if (row !== undefined && hasLiveOwner(row)) continue;
    mountedIds.add(id);
    report.mounts.push(mount.mountpoint);
  }
  if (!dryRun) {
    for (const id of mountedIds) {
      try {
        await deps.sandboxes.clearMountsOf(id, known.get(id)?.runtime);
      } catch (err) {
        fail(`mounts of ${id}`, err);
      }
    }
  }

  // 3. Sandbox directories without a record (create writes the record first, destroy removes it last), the
  // records read after the listing for the same reason as above.
  const names = await readdir(deps.layout.sandboxesDir).catch(() => [] as string[]);
  const recorded = new Set((await deps.store.all()).map((r) => r.id));
  for (const name of names) {
    if (!SANDBOX_DIR.test(name) || recorded.has(name)) continue;
    const dir = `${prefix}${name}`;
    if ((await unfinishedCommit(deps.layout, name, deps.logger)) !== null) {
      // No record says whose it is, but it holds changes that are not in the codebase yet.
      fail(dir, new Error('a commit of it did not finish and no record names it: kept for you to look at'));
      continue;
    }
    if (!dryRun) {
      try {
        await deps.sandboxes.clearMountsOf(name);
        await rm(deps.layout.sandbox(validateId('sandbox', name)).dir, { recursive: true, force: true });
      } catch (err) {
        fail(dir, err);
        continue;
      }
    }
    report.directories.push(dir);
  }

  // 3b. Destroyed sandboxes' directories a process left in the trash, half-removed (trash.ts).
  const trash = await deps.sandboxes.trash.empty({ dryRun });
  report.directories.push(...trash.removed);
  for (const { entry, err } of trash.failed) fail(entry, err);

  // 4. What runtimes left outside any sandbox for processes that are gone (never a live process's). A
  // runtime whose host part is missing (no docker engine) has nothing of ours running there.
  if (!dryRun) {
    for (const name of deps.runtimes.names) {
      try {
        const runtime = await deps.runtimes.get(name);
        report.runtimes.push(...((await runtime.collectGarbage?.()) ?? []));
      } catch (err) {
        fail(`leftovers of the ${name} runtime`, err);
      }
    }
  }

  // 5. Linked codebase records no sandbox refers to (the directory is the user's and stays).
  if (options.codebases !== false) {
    const referenced = new Set((await deps.store.all()).map((r) => r.codebase_id));
    for (const codebase of await deps.codebases.list()) {
      if (codebase.kind !== 'linked' || referenced.has(codebase.id)) continue;
      if (!dryRun) {
        try {
          await deps.codebases.delete(codebase.id);
        } catch (err) {
          if (err instanceof NotFoundError || err instanceof WrongStateError) continue;
          fail(`codebase ${codebase.id}`, err);
          continue;
        }
      }
      report.codebases.push({ id: codebase.id, path: codebase.path });
    }
  }
  if (!dryRun) deps.logger.info({ report }, 'garbage collected');
  return report;
}
