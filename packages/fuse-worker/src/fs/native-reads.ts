// READs answered by the binding, in C, without entering JS (fuse-native's FastReads, native/fast-read.c).
//
// A READ or WRITE the worker served (caller accepted, the rules allow reading the node's path) registers
// the node's host fd with the binding, in the same synchronous step as a check of the rules
// (DataPath.registerRead). A registration ends where the decision could change: the binding ends every one
// at a RENAME or LINK (a path, so a rule, may change), the worker at a rule change or a change behind the
// mount (invalidate), at an UNLINK of one of the node's names (its path may be another name now) and
// before it closes the node's fd (closing: the number must never name another file). Only bytes in the
// host's page cache are read there; the rest come here, as before.
//
// Audit: allowed accesses are recorded when a handle is opened, never per READ, so a READ served in C
// leaves exactly the records one served here would. What a READ tells the worker (the kernel's atime is
// stale, the directory's listing, the read-ahead at a file's start) arrives in the binding's report
// before the next request reaches a handler.
import type { FastReadReport, FastReads, LowLevelFuse } from '@agentfense/fuse-native';
import { atLeast } from '@agentfense/protocol';
import type { FsCore } from './core.js';
import type { OpStats } from './op-stats.js';

/**
 * After the worker served a READ or WRITE of node `ino` through `fd`, or adopted a file the binding
 * created (native-creates.ts: its first WRITEs never reach the worker): its next READs may be answered
 * by the binding. The rules are checked again in this synchronous step: a check made before an await
 * (a handle's open) must not register a decision taken on rules that changed meanwhile.
 */
export function registerIfReadable(
  fs: Pick<FsCore, 'nativeReads' | 'inodes' | 'rules'>,
  ino: number,
  fd: number,
): void {
  const native = fs.nativeReads;
  if (native === undefined) return;
  const path = fs.inodes.pathOf(ino);
  // Unlinked but open: only this handle serves it, as the worker does (data-ops.ts #checkedCached).
  if (path !== null && !atLeast(fs.rules.permissionOf(path), 'read')) return;
  native.served(ino, fd);
}

export interface NativeReadsOptions {
  /** The mount whose binding answers the READs. */
  readonly fuse: Pick<LowLevelFuse, 'fastReads'>;
  /** Besides root, the only caller uid the binding serves (the worker's own check, binding.ts); absent: any. */
  readonly callerUid: number | undefined;
  /** What a READ served in the worker notes (DataPath.noteRead); `offset` 0 or 1 (past the start). */
  readonly noteRead: (ino: number, offset: number) => void;
  readonly stats: OpStats | undefined;
}

export class NativeReads {
  readonly #fast: FastReads;
  readonly #noteRead: (ino: number, offset: number) => void;
  readonly #stats: OpStats | undefined;
  #answered = 0;

  constructor(options: NativeReadsOptions) {
    this.#noteRead = options.noteRead;
    this.#stats = options.stats;
    this.#fast = options.fuse.fastReads(options.callerUid, (report) => this.#read(report));
  }

  /** The worker has just decided that node `ino` is readable and read it through `fd`. */
  served(ino: number, fd: number): void {
    this.#fast.register(ino, fd);
  }

  /** Before node `ino`'s fd closes, and when it lost a name. */
  closing(ino: number): void {
    this.#fast.drop(ino);
  }

  /** READs the binding answered since the mount (reported at the end of each batch it read). */
  get answered(): number {
    return this.#answered;
  }

  /** The rules changed, or files changed behind the mount: no READ is answered on an earlier decision. */
  invalidate(): void {
    this.#fast.invalidate();
  }

  #read(report: FastReadReport): void {
    const { pairs } = report;
    this.#answered += report.reads;
    for (let i = 0; i + 1 < pairs.length; i += 2) this.#noteRead(pairs[i]!, pairs[i + 1] === 1 ? 0 : 1);
    const stats = this.#stats;
    if (stats !== undefined) for (let i = 0; i < report.reads; i++) stats.record('read-native', 0, false);
  }
}
