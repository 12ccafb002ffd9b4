// LOOKUP misses answered by the binding, in C, without entering JS (fuse-native's FastEntries,
// native/fast-entries.c).
//
// When the worker answers a LOOKUP of a missing name, it asks whether the parent directory makes every
// such answer trivial: the directory exists only in the sandbox's writable layer (delta/fast-dir.ts: an
// add, nothing of the codebase at or below it, no frozen layer) and every path below it is `write` under
// the rules in force (RuleSet.uniformBelow), so no name in it is hidden, and a missing one is recorded by
// no audit (only a LOOKUP that finds an entry or a hidden name audits). Such a directory is marked: the
// binding then answers its LOOKUPs of names it lacks itself, with a negative entry the kernel does not
// cache, while the codebase still lacks the directory. An UNLINK or RMDIR the worker answers in a directory
// marks it the same way, so the rest of an `rm -rf` after a RENAME (git's last steps) is the binding's. A
// name that exists, a name that is not plain ASCII,
// another caller than the sandbox's or root: the worker, as before.
//
// Revoked (no mark served again until made anew): before a rule change applies, as a checkpoint or restore
// begins, before a commit or discard, at every invalidation of the kernel's caches; by the binding at a
// RENAME's decode and reply, unless it moves a file out of a marked directory (narrowRenames,
// rename-nodes.ts: no directory moves, so no mark's path changes). A node's mark goes when the kernel forgets the node.
//
// With `dirAttrs` on (nativeDirAttrs), a mark also lets the binding answer the directory's GETATTRs
// (native/fast-create.c) where JS would shape nothing: the directory's own rule is `write` (its mode is the
// host's), and the writable layer's filesystem counts subdirectories in st_nlink (the link count JS lists
// is the host's: nothing below it is hidden or in the codebase). The mark then carries the st_ino the
// kernel was shown for the node.
import type { FastEntries, LowLevelFuse } from '@agentfense/fuse-native';
import type { RuleSet } from '@agentfense/protocol';
import type { FastDir } from '../delta/fast-dir.js';
import type { OpStats } from './op-stats.js';

/** Bound on remembered checks (node -> generation): cleared, not evicted, when reached. */
const MAX_CHECKED = 50_000;

export interface NativeLookupsOptions {
  readonly fuse: Pick<LowLevelFuse, 'fastEntries'>;
  readonly codebaseRootFd: number;
  /** The directory at `path`, if only the writable layer holds it (Delta.fastDir). */
  readonly fastDir: (path: string) => FastDir | null;
  readonly rules: () => RuleSet;
  readonly pathOf: (ino: number) => string | null;
  /** The st_ino the kernel was shown for node `ino`; 0: none yet. */
  readonly stInoOf: (ino: number) => number;
  readonly stats: OpStats | undefined;
}

export class NativeLookups {
  readonly #fast: FastEntries;
  readonly #options: NativeLookupsOptions;
  /** Directories checked under a generation (marked or not): checked again only after a revocation. */
  readonly #checked = new Map<number, number>();
  /** LOOKUPs the binding answered that `stats` has counted. */
  #counted = 0;
  /** Whether marks let the binding answer the directories' GETATTRs too (set before the first mark). */
  dirAttrs = false;

  constructor(options: NativeLookupsOptions) {
    this.#fast = options.fuse.fastEntries(options.codebaseRootFd);
    this.#options = options;
  }

  /** Besides root, the only caller uid the binding serves; undefined: any. */
  set callerUid(uid: number | undefined) {
    this.#fast.callerUid = uid;
  }

  /**
   * The worker answered a LOOKUP of a missing name in directory `parent`, or removed an entry of it (an
   * UNLINK or RMDIR, which a RENAME's revocation leaves to the worker until something marks the
   * directory again): mark it if it qualifies.
   */
  consider(parent: number): void {
    const generation = this.#fast.generation;
    if (this.#checked.get(parent) === generation) return;
    if (this.#checked.size >= MAX_CHECKED) this.#checked.clear();
    this.#checked.set(parent, generation);
    const path = this.#options.pathOf(parent);
    const rules = this.#options.rules();
    if (path === null || rules.uniformBelow(path) !== 'write') return;
    const dir = this.#options.fastDir(path);
    if (dir === null) return;
    // uniformBelow speaks of the paths strictly below: the directory's own rule shapes its mode bits
    const attrs = this.dirAttrs && dir.hostLinks && rules.permissionOf(path) === 'write';
    this.#fast.mark(parent, dir.upperRootFd, dir.rel, attrs ? this.#options.stInoOf(parent) : 0);
  }

  /** The kernel forgot node `ino`: its mark goes (its number may name another node later). */
  forget(ino: number): void {
    if (this.#checked.delete(ino)) this.#fast.unmark(ino);
  }

  /** No LOOKUP is answered on an earlier mark. */
  revoke(): void {
    this.#fast.revoke();
  }

  /** Counts the LOOKUPs the binding answered since the last call, as `lookup-native`. */
  /** LOOKUPs the binding answered since the mount. */
  get answered(): number {
    return this.#fast.served;
  }

  count(): void {
    const served = this.#fast.served;
    const stats = this.#options.stats;
    if (stats !== undefined)
      for (let i = this.#counted; i < served; i++) stats.record('lookup-native', 0, false);
    this.#counted = served;
  }
}
