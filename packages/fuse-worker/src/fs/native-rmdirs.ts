// RMDIRs answered by the binding, in C, without entering JS (fuse-native's native/fast-rmdir.c).
//
// Where the binding would answer an UNLINK (native-unlinks.ts: a directory the lookup fast path marked,
// every path below it `write`, the codebase lacking it, the sandbox's caller, no audit of allowed
// accesses), an RMDIR of a directory with no entry is answered there, as namespace-ops.ts rmdir would: the
// codebase lacks everything below a marked directory, so an empty upper directory is empty in the merged
// view; the removal's record (`unbase`: the directory is an add) is journaled before the directory goes.
// Anything else (an entry inside, a symlink, an odd name) comes here as before. The binding reports each
// one in the create stream, so creates, unlinks and rmdirs are taken in their order before the worker's
// next request (`adopt`): the records join the delta's state, the quota lets the inode go, the delta drops
// its cached fds of the directory, the inode table drops the name, the parent's listing and its count of
// subdirectories are dropped (listed again when next asked).
import type { FastCreated, FastCreates } from '@agentfense/fuse-native';
import type { FastCreateSink } from '../delta/fast-dir.js';
import type { FsCore } from './core.js';

export interface NativeRmdirsOptions {
  readonly fast: FastCreates;
  readonly core: FsCore;
  readonly sink: FastCreateSink;
}

export class NativeRmdirs {
  readonly #fast: FastCreates;
  readonly #core: FsCore;
  readonly #sink: FastCreateSink;
  #counted = 0;

  constructor(options: NativeRmdirsOptions) {
    this.#fast = options.fast;
    this.#core = options.core;
    this.#sink = options.sink;
    this.#fast.rmdirs = true;
  }

  /**
   * The binding removed directory `c.name` from `c.parent` (or, `c.ino` 0, journaled its removal and,
   * `c.fd` 2, its add again: its rmdir(2) failed and the request came here).
   */
  adopt(c: FastCreated): void {
    const core = this.#core;
    const removed = c.ino !== 0;
    if (c.journalBytes > 0) this.#fast.adopted(c.fd);
    const path = core.inodes.childPath(c.parent, c.name);
    // the parent went meanwhile (it cannot while the kernel holds it): the records alone are kept
    if (path === null) return;
    this.#sink.removedDir(path, removed ? c.stIno : undefined, c.journalBytes, c.fd === 2);
    if (!removed) return;
    core.cache.replays.mutated();
    core.inodes.unlink(c.parent, c.name);
    core.forgetListing(c.parent);
    // namespace-ops.ts rmdir moves the parent's count by one; here it may have been listed since
    core.subdirCounts.changedOutside(c.parent);
  }

  /** RMDIRs the binding answered since the mount. */
  get answered(): number {
    return this.#fast.rmdirsServed;
  }

  /** Counts the RMDIRs answered since the last call as `rmdir-native`. */
  count(): void {
    const served = this.#fast.rmdirsServed;
    const stats = this.#core.stats;
    if (stats !== undefined)
      for (let i = this.#counted; i < served; i++) stats.record('rmdir-native', 0, false);
    this.#counted = served;
  }
}
