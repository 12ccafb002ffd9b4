// Durable storage of a delta's metadata: an append-only JSONL journal replayed over a compacted snapshot.
import { constants, fstatSync, ftruncateSync, writeSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

import type { HostDir } from '../host/host-dir.js';
import { MetaState, type MetaRecord, type MetaSnapshot } from './meta-state.js';
import type { DeltaLogger } from './types.js';

const SNAPSHOT = 'snapshot.json';
const SNAPSHOT_TMP = 'snapshot.json.tmp';
const journalName = (generation: number): string => `journal-${generation}.jsonl`;

/** Journal records appended since the last snapshot after which `Delta` compacts (at open and commit). */
export const COMPACT_AFTER_RECORDS = 10_000;

/**
 * Durability model: a worker crash is a process death, not a power cut. Each record is appended with one
 * write(2) before the filesystem change it describes, so the page cache holds it when the process dies; no
 * fsync on this hot path. Compaction writes the snapshot to a temp file, fsyncs and renames it, then starts
 * a new journal generation: a crash at any point leaves either the old snapshot + old journal or the new
 * snapshot (+ an empty or missing new journal). A torn last line cannot come from a process death
 * (write(2) to a regular file completes) but is tolerated and logged anyway.
 */
export class MetaJournal {
  private generation: number;
  private handle: FileHandle;
  private appended = 0;
  private readonly dir: HostDir;
  private readonly logger: DeltaLogger;

  private constructor(dir: HostDir, generation: number, handle: FileHandle, logger: DeltaLogger) {
    this.dir = dir;
    this.generation = generation;
    this.handle = handle;
    this.logger = logger;
  }

  /** Loads snapshot + journal from `dir` into a fresh MetaState. */
  static async open(options: {
    dir: HostDir;
    logger: DeltaLogger;
  }): Promise<{ journal: MetaJournal; state: MetaState }> {
    const { dir, logger } = options;
    const state = new MetaState();
    let generation = 0;
    const snapshotText = await readText(dir, SNAPSHOT);
    if (snapshotText !== null) {
      const snapshot = JSON.parse(snapshotText) as MetaSnapshot;
      state.load(snapshot);
      generation = snapshot.generation;
    }
    const journalText = (await readText(dir, journalName(generation))) ?? '';
    const lines = journalText.split('\n');
    const torn = lines.pop();
    if (torn !== undefined && torn !== '') logger.warn({ generation }, 'ignoring a torn last journal record');
    for (const line of lines) state.apply(JSON.parse(line) as MetaRecord);
    // Journals of other generations are leftovers of an interrupted compaction.
    for (const entry of await dir.readdir('')) {
      if (entry.name !== journalName(generation) && entry.name.startsWith('journal-'))
        await dir.unlink(entry.name);
    }
    const handle = await openJournal(dir, generation);
    const journal = new MetaJournal(dir, generation, handle, logger);
    journal.appended = lines.length;
    return { journal, state };
  }

  /** Records appended since the last compaction. */
  get pending(): number {
    return this.appended;
  }

  /**
   * Appends records with a single write(2), synchronously: a few hundred bytes into the page cache take a
   * few µs, a trip through the thread pool 50-100 µs, and every create, mkdir, unlink and rename of the
   * sandbox appends one. Resolves once the kernel has them.
   */
  append(records: readonly MetaRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    const data = Buffer.from(records.map((r) => `${JSON.stringify(r)}\n`).join(''));
    let offset = 0;
    try {
      while (offset < data.length) offset += writeSync(this.handle.fd, data, offset, data.length - offset);
    } catch (err) {
      // A full filesystem can take part of the records: cut them off again, or the next append would
      // follow a torn line in the middle of the journal, which replay refuses.
      if (offset > 0) this.#cutTail(offset);
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    this.appended += records.length;
    return Promise.resolve();
  }

  /** Removes the last `bytes` written (a partial append); failing that, a torn line stays for replay to report. */
  #cutTail(bytes: number): void {
    try {
      ftruncateSync(this.handle.fd, fstatSync(this.handle.fd).size - bytes);
    } catch (err) {
      this.logger.warn({ err }, 'could not cut a partly written journal record');
    }
  }

  /**
   * Writes `state` as the snapshot of the next generation and starts an empty journal. A failure (a full
   * filesystem) leaves the current snapshot and journal as they were, and no temporary file.
   */
  async compact(state: MetaState): Promise<void> {
    const next = this.generation + 1;
    const tmp = await this.dir.open(
      SNAPSHOT_TMP,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC,
      0o600,
    );
    try {
      await tmp.writeFile(JSON.stringify(state.snapshot(next)));
      await tmp.sync();
    } catch (err) {
      await tmp.close().catch(() => undefined);
      await this.dir.unlink(SNAPSHOT_TMP).catch(() => undefined);
      throw err;
    }
    await tmp.close();
    await this.dir.rename(SNAPSHOT_TMP, { dir: this.dir, rel: SNAPSHOT });
    const handle = await openJournal(this.dir, next);
    await this.handle.close();
    await this.dir.unlink(journalName(this.generation)).catch((err: unknown) => {
      this.logger.debug({ err }, 'old journal already gone');
    });
    this.handle = handle;
    this.generation = next;
    this.appended = 0;
  }

  /** Closes the journal file. */
  async close(): Promise<void> {
    await this.handle.close();
  }
}

async function openJournal(dir: HostDir, generation: number): Promise<FileHandle> {
  return dir.open(
    journalName(generation),
    constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT,
    0o600,
  );
}

async function readText(dir: HostDir, name: string): Promise<string | null> {
  let handle: FileHandle;
  try {
    handle = await dir.open(name, constants.O_RDONLY);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    return await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
}
