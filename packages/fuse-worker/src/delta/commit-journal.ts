// The commit journal of a delta: an intent record (meta/commit-intent.json) written and fsynced before a
// commit's first write into the codebase and removed once the commit has run to its end. While it exists
// the commit is unfinished (a process died or a stop cut it short): the delta still holds every change
// the intent lists that has not been applied yet, and the next commit finishes them first (roll forward,
// commit.ts). The control plane reads it (readPendingCommit) so that nothing removes a delta whose commit
// is unfinished. Which changes were applied is the delta's own journal: an applied change is forgotten
// there (journal.ts), so whatever the intent lists and the delta still holds is left to do, or in doubt.
import { constants, lstatSync } from 'node:fs';
import fsp from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

import type { CommitMode } from '@agentfense/protocol';

import type { HostDir } from '../host/host-dir.js';
import { randomHex } from '../host/random-hex.js';

const INTENT = 'commit-intent.json';
const INTENT_TMP = 'commit-intent.json.tmp';

/** What a commit is about to do, as recorded before its first write into the codebase. */
export interface CommitIntent {
  readonly version: 1;
  /** Names this commit's temporary files in the codebase (`.<name>.af-commit-<id>`), so a retry finds them. */
  readonly id: string;
  readonly mode: CommitMode;
  /** ms since the epoch. */
  readonly startedAt: number;
  /** Layer-relative paths of the changes it applies ('a/b'), in no particular order. */
  readonly paths: readonly string[];
}

/** An unfinished commit as the control plane sees it (readPendingCommit). */
export interface PendingCommit {
  readonly mode: CommitMode;
  /** When it started (ms since the epoch). */
  readonly startedAt: number;
  /** How many changes it set out to apply (some may be applied already). */
  readonly changes: number;
}

/** A fresh commit id (16 hex digits: unique among the temporary names of one codebase directory). */
export function newCommitId(): string {
  return randomHex(8);
}

/** The intent record of one delta's meta/ directory. */
export class CommitJournal {
  readonly #dir: HostDir;

  constructor(metaDir: HostDir) {
    this.#dir = metaDir;
  }

  /**
   * Whether an intent is recorded (its name exists; pending() reads it): one synchronous lstat in the
   * worker's own meta/ directory, where a thread-pool trip costs milliseconds on a loaded host.
   */
  mayBePending(): boolean {
    return lstatSync(join(this.#dir.path, INTENT), { throwIfNoEntry: false }) !== undefined;
  }

  /** The unfinished commit's intent, or null when no commit is under way or unfinished. */
  async pending(): Promise<CommitIntent | null> {
    let handle: FileHandle;
    try {
      handle = await this.#dir.open(INTENT, constants.O_RDONLY);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    try {
      return parseIntent(await handle.readFile('utf8'));
    } finally {
      await handle.close();
    }
  }

  /**
   * Records `intent` durably: a temporary file, fsynced, renamed into place, the directory fsynced. Only
   * then may the commit write into the codebase: a crash (or a power cut) at any later moment leaves the
   * intent for the next commit to finish. Replaces an earlier intent (a retry lists what is left).
   */
  async begin(intent: Omit<CommitIntent, 'version' | 'startedAt'>): Promise<void> {
    const record: CommitIntent = { version: 1, startedAt: Date.now(), ...intent };
    const tmp = await this.#dir.open(
      INTENT_TMP,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC,
      0o600,
    );
    try {
      await tmp.writeFile(JSON.stringify(record));
      await tmp.sync();
    } finally {
      await tmp.close();
    }
    await this.#dir.rename(INTENT_TMP, { dir: this.#dir, rel: INTENT });
    const dir = await fsp.open(this.#dir.path, constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }

  /**
   * The commit ran to its end: forgets its intent. Not fsynced: if a power cut undoes the removal, the
   * next commit finds every listed change applied (gone from the delta) or holding what it would write,
   * and finishes at once.
   */
  async finish(): Promise<void> {
    await this.#dir.unlink(INTENT).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }
}

/** The unfinished commit of the delta at `deltaDir` (the control plane's view), or null. */
export async function readPendingCommit(deltaDir: string): Promise<PendingCommit | null> {
  let text: string;
  try {
    text = await fsp.readFile(join(deltaDir, 'meta', INTENT), 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw err;
  }
  const intent = parseIntent(text);
  return { mode: intent.mode, startedAt: intent.startedAt, changes: intent.paths.length };
}

/** An intent record, checked: it is written whole (temporary file + rename), so anything else is damage. */
function parseIntent(text: string): CommitIntent {
  let value: Partial<CommitIntent> | null = null;
  try {
    value = JSON.parse(text) as Partial<CommitIntent> | null;
  } catch {
    // reported below
  }
  if (
    value === null ||
    typeof value !== 'object' ||
    value.version !== 1 ||
    typeof value.id !== 'string' ||
    !/^[0-9a-f]{16}$/.test(value.id) ||
    (value.mode !== 'detect-conflicts' && value.mode !== 'last-writer-wins') ||
    typeof value.startedAt !== 'number' ||
    !Array.isArray(value.paths) ||
    !value.paths.every((p) => typeof p === 'string')
  ) {
    throw new Error(`the delta's ${INTENT} is damaged: not an intent record of this version`);
  }
  return value as CommitIntent;
}
