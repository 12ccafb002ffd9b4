// Durable storage of a delta's metadata: an append-only JSONL journal replayed over a compacted snapshot.
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  renameSync,
  rmSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { readFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

import type { HostDir } from '../host/host-dir.js';
import { MetaState, type MetaRecord, type MetaSnapshot } from './meta-state.js';
import type { DeltaLogger } from './types.js';

const SNAPSHOT = 'snapshot.json';
const SNAPSHOT_TMP = 'snapshot.json.tmp';
/** Characters of snapshot text gathered before each write(2). */
const SNAPSHOT_PIECE = 64 * 1024;
const journalName = (generation: number): string => `journal-${generation}.jsonl`;

/** Journal records appended since the last snapshot after which `Delta` compacts (at open and commit). */
export const COMPACT_AFTER_RECORDS = 10_000;

/**
 * Journal bytes past which it is compacted at once, while the sandbox works (and past the snapshot's own
 * size, so the work stays proportional to what is appended): create/unlink churn appends records without
 * end while the state they leave stays small, and the journal is on the host's disk, charged to the quota.
 * A delta with a disk quota compacts at an eighth of it at the latest, so that churn never fills a quota
 * with records of entries long gone.
 */
export const COMPACT_AFTER_BYTES = 4 * 1024 * 1024;

/** The least journal worth a compaction (each one costs an fsync). */
const COMPACT_AT_LEAST_BYTES = 64 * 1024;

/** When a journal of a delta with `quotaBytes` (undefined: none) is compacted while the sandbox works. */
export function compactAfterBytes(quotaBytes: number | undefined): number {
  if (quotaBytes === undefined) return COMPACT_AFTER_BYTES;
  return Math.max(COMPACT_AT_LEAST_BYTES, Math.min(COMPACT_AFTER_BYTES, Math.floor(quotaBytes / 8)));
}

/**
 * Durability model: a worker crash is a process death, not a power cut. Each record is appended with one
 * write(2) before the filesystem change it describes, so the page cache holds it when the process dies; no
 * fsync on this hot path. Compaction writes the snapshot to a temp file, fsyncs and renames it, then starts
 * a new journal generation: a crash at any point leaves either the old snapshot + old journal or the new
 * snapshot (+ an empty or missing new journal). A torn last line cannot come from a process death
 * (write(2) to a regular file completes) but is tolerated and logged anyway.
 *
 * The meta directory is the worker's own (root-only, never in the sandbox's view): its files are opened
 * by path, synchronously, so that recording and compacting never yield to another request in between.
 */
export class MetaJournal {
  private generation: number;
  private fd: number;
  private appended = 0;
  #journalBytes: number;
  #snapshotBytes: number;
  /** Whether meta/snapshot.json exists (none before the first compaction, nor after a reset). */
  #hasSnapshot = false;
  /** No automatic compaction before the journal reaches this size (moved on after a failed one). */
  #compactAt: number;
  readonly #compactAfter: number;
  private readonly dir: HostDir;
  private state: MetaState;
  private readonly logger: DeltaLogger;

  private constructor(o: {
    dir: HostDir;
    state: MetaState;
    generation: number;
    fd: number;
    logger: DeltaLogger;
    journalBytes: number;
    snapshotBytes: number;
    compactAfterBytes: number;
  }) {
    this.dir = o.dir;
    this.state = o.state;
    this.generation = o.generation;
    this.fd = o.fd;
    this.logger = o.logger;
    this.#journalBytes = o.journalBytes;
    this.#snapshotBytes = o.snapshotBytes;
    this.#compactAfter = o.compactAfterBytes;
    this.#compactAt = this.#threshold();
  }

  /** Loads snapshot + journal from `dir` into a fresh MetaState. */
  static async open(options: {
    dir: HostDir;
    logger: DeltaLogger;
    /** Journal bytes past which it is compacted while the sandbox works (compactAfterBytes). */
    compactAfterBytes?: number;
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
    const { records, torn } = replay(state, journalText);
    if (torn) logger.warn({ generation }, 'ignoring a torn last journal record');
    // Journals of other generations are leftovers of an interrupted compaction.
    for (const entry of await dir.readdir('')) {
      if (entry.name !== journalName(generation) && entry.name.startsWith('journal-'))
        await dir.unlink(entry.name);
    }
    const fd = openJournal(dir, generation);
    const journal = new MetaJournal({
      dir,
      state,
      generation,
      fd,
      logger,
      journalBytes: fstatSync(fd).size,
      snapshotBytes: snapshotText === null ? 0 : Buffer.byteLength(snapshotText),
      compactAfterBytes: options.compactAfterBytes ?? COMPACT_AFTER_BYTES,
    });
    journal.appended = records;
    journal.#hasSnapshot = snapshotText !== null;
    return { journal, state };
  }

  /**
   * Records another writer (the binding's create fast path, fs/native-creates.ts) appended to this
   * journal's fd and has not handed over yet: while there are any, no compaction runs (it would drop
   * them with the old journal). Set by that writer.
   */
  unadopted: () => number = () => 0;
  /** Hears the journal's fd whenever it changes (-1: closed), and at once. */
  #onFd: ((fd: number) => void) | undefined;

  watchFd(listener: (fd: number) => void): void {
    this.#onFd = listener;
    listener(this.fd);
  }

  #setFd(fd: number): void {
    this.fd = fd;
    this.#onFd?.(fd);
  }

  /**
   * Takes in records another writer appended itself (`bytes` of whole lines, in the format #append
   * writes): applied to the state as record() would, in the same turn as the writer hands them over.
   */
  adopt(records: readonly MetaRecord[], bytes: number): void {
    for (const r of records) this.state.apply(r);
    this.#journalBytes += bytes;
    this.appended += records.length;
    if (this.#journalBytes >= this.#compactAt) this.#compactNow();
  }

  /** Records appended since the last compaction. */
  get pending(): number {
    return this.appended;
  }

  /** Bytes the metadata takes on the host's disk (snapshot and journal), charged to the disk quota. */
  get diskBytes(): number {
    return this.#snapshotBytes + this.#journalBytes;
  }

  /**
   * Journals records (one write(2), synchronously: a few hundred bytes into the page cache take a few µs,
   * a trip through the thread pool 50-100 µs, and every create, mkdir, unlink and rename of the sandbox
   * appends one), then applies them to the state in the same turn, so that a compaction always snapshots
   * a state holding exactly the records journalled. Compacts when the journal outgrew its threshold.
   */
  record(records: readonly MetaRecord[]): void {
    if (records.length === 0) return;
    this.#append(records);
    for (const r of records) this.state.apply(r);
    if (this.#journalBytes >= this.#compactAt) this.#compactNow();
  }

  #append(records: readonly MetaRecord[]): void {
    const data = Buffer.from(records.map((r) => `${JSON.stringify(r)}\n`).join(''));
    let offset = 0;
    try {
      while (offset < data.length) offset += writeSync(this.fd, data, offset, data.length - offset);
    } catch (err) {
      // A full filesystem can take part of the records: cut them off again, or the next append would
      // follow a torn line in the middle of the journal, which replay refuses.
      if (offset > 0) this.#cutTail(offset);
      throw err instanceof Error ? err : new Error(String(err));
    }
    this.#journalBytes += data.length;
    this.appended += records.length;
  }

  /** Removes the last `bytes` written (a partial append); failing that, a torn line stays for replay to report. */
  #cutTail(bytes: number): void {
    try {
      ftruncateSync(this.fd, fstatSync(this.fd).size - bytes);
    } catch (err) {
      this.logger.warn({ err }, 'could not cut a partly written journal record');
    }
  }

  #compactNow(): void {
    try {
      this.#compact();
    } catch (err) {
      // The journal stays as it is (complete); tried again once it grew by as much again.
      this.#compactAt = this.#journalBytes + this.#threshold();
      this.logger.warn({ err }, 'could not compact the delta journal; it is kept as it is');
    }
  }

  /**
   * Writes the state as the snapshot of the next generation and starts an empty journal. A failure (a full
   * filesystem) leaves the current snapshot and journal as they were, and no temporary file.
   */
  async compact(state: MetaState): Promise<void> {
    if (state !== this.state) throw new Error('compact: not the state this journal records');
    this.#compact();
    return Promise.resolve();
  }

  #compact(): void {
    if (this.unadopted() > 0) throw new Error('journal records of the binding are not adopted yet');
    const next = this.generation + 1;
    const tmp = join(this.dir.path, SNAPSHOT_TMP);
    const written = writeSnapshotFile(tmp, this.state, next);
    renameSync(tmp, join(this.dir.path, SNAPSHOT));
    const journal = openJournal(this.dir, next);
    closeSync(this.fd);
    try {
      unlinkSync(join(this.dir.path, journalName(this.generation)));
    } catch (err) {
      this.logger.debug({ err }, 'old journal already gone');
    }
    this.#setFd(journal);
    this.generation = next;
    this.appended = 0;
    this.#journalBytes = 0;
    this.#snapshotBytes = written;
    this.#hasSnapshot = true;
    this.#compactAt = this.#threshold();
  }

  /**
   * The files that hold the state now (names in the meta directory): the snapshot, when there is one, and
   * the journal of its generation. A checkpoint links them into the frozen layer (layer-change.ts): nothing
   * rewrites either in place (a compaction renames a new snapshot over the name; records are appended only
   * under the delta's lock, which the checkpoint holds until reset() gave this journal other files).
   */
  files(): string[] {
    return [...(this.#hasSnapshot ? [SNAPSHOT] : []), journalName(this.generation)];
  }

  /**
   * Starts over with an empty state (a checkpoint froze the old one, or a restore dropped it), in O(1) and
   * without an fsync: the snapshot and the journal are unlinked (a frozen layer may hold other links to
   * them: those stay as they are) and an empty journal of generation 0 is started; no snapshot is the empty
   * state of generation 0. A crash between the steps leaves at worst the snapshot gone and the old
   * journal there, which the next open deletes as another generation's; the layer change's intent has the
   * reset run again. Returns the new state, which this journal records from now on; the old state object
   * is left as it was.
   */
  reset(): MetaState {
    const path = (name: string): string => join(this.dir.path, name);
    unlinkIfPresent(path(SNAPSHOT));
    this.#hasSnapshot = false;
    closeSync(this.fd);
    this.#setFd(-1);
    unlinkIfPresent(path(journalName(this.generation)));
    unlinkIfPresent(path(journalName(0)));
    this.#setFd(openJournal(this.dir, 0));
    this.generation = 0;
    this.state = new MetaState();
    this.appended = 0;
    this.#journalBytes = 0;
    this.#snapshotBytes = 0;
    this.#compactAt = this.#threshold();
    return this.state;
  }

  /** Journal bytes at which the next compaction runs: past the set bound and the snapshot's size. */
  #threshold(): number {
    return Math.max(this.#compactAfter, this.#snapshotBytes);
  }

  /** Closes the journal file (again: nothing). */
  close(): Promise<void> {
    if (this.fd >= 0) closeSync(this.fd);
    this.#setFd(-1);
    return Promise.resolve();
  }
}

/**
 * Writes `state` as the snapshot of `generation` to the file `path` (created or truncated), a ~64 KiB
 * piece at a time (the snapshot of a large state never sits in memory whole), and fsyncs it. On a failure
 * the file is removed. Returns the bytes written.
 */
export function writeSnapshotFile(path: string, state: MetaState, generation: number): number {
  const fd = openSync(
    path,
    constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
    0o600,
  );
  let written = 0;
  try {
    let pending: string[] = [];
    let pendingLength = 0;
    const flush = (): void => {
      written += writeFully(fd, Buffer.from(pending.join('')));
      pending = [];
      pendingLength = 0;
    };
    for (const piece of state.snapshotText(generation)) {
      pending.push(piece);
      pendingLength += piece.length;
      if (pendingLength >= SNAPSHOT_PIECE) flush();
    }
    flush();
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(path, { force: true });
    throw err;
  }
  closeSync(fd);
  return written;
}

/**
 * The state kept in the meta directory `metaDir` of a frozen layer, loaded exactly as MetaJournal.open
 * loads a delta's (its snapshot, then its generation's journal replayed; a torn last line ignored), by
 * path and read-only: nothing is compacted, deleted or created. Null when `metaDir` holds neither a
 * snapshot nor the marker `marker` (a checkpoint made since snapshots are no longer rewritten for it).
 */
export async function readLayerMeta(metaDir: string, marker: string): Promise<MetaState | null> {
  const snapshotText = await readFileOrNull(join(metaDir, SNAPSHOT));
  if (snapshotText === null && (await readFileOrNull(join(metaDir, marker))) === null) return null;
  const state = new MetaState();
  let generation = 0;
  if (snapshotText !== null) {
    const snapshot = JSON.parse(snapshotText) as MetaSnapshot;
    state.load(snapshot);
    generation = snapshot.generation;
  }
  replay(state, (await readFileOrNull(join(metaDir, journalName(generation)))) ?? '');
  return state;
}

/** Applies the journal `text` to `state`: its record count, and whether a torn last line was ignored. */
function replay(state: MetaState, text: string): { records: number; torn: boolean } {
  const lines = text.split('\n');
  const torn = lines.pop();
  for (const line of lines) state.apply(JSON.parse(line) as MetaRecord);
  return { records: lines.length, torn: torn !== undefined && torn !== '' };
}

async function readFileOrNull(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

function unlinkIfPresent(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** write(2) until all of `data` is written; its length. */
function writeFully(fd: number, data: Buffer): number {
  for (let offset = 0; offset < data.length;) offset += writeSync(fd, data, offset, data.length - offset);
  return data.length;
}

function openJournal(dir: HostDir, generation: number): number {
  return openSync(
    join(dir.path, journalName(generation)),
    constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW,
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
