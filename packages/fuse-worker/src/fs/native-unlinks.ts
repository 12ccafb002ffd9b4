// UNLINKs answered by the binding, in C, without entering JS (fuse-native's native/fast-unlink.c).
//
// Where the binding would answer a CREATE (native-creates.ts: a directory the lookup fast path marked,
// every path below it `write`, the codebase lacking it, the sandbox's caller, no audit of allowed
// accesses), an UNLINK of a regular file with one link and under 1 MiB allocated is answered there, as
// namespace-ops.ts unlink would: the file kept open for a descriptor the sandbox may still hold, the
// removal's record journaled (`unbase`: the codebase never had the path, so no whiteout), the name removed
// from the directory's own fd. The binding reports each one in the create stream, so creates and unlinks
// are taken in their order before the worker's next request (`adopt`): the record joins the delta's
// state, the quota lets the inode go, the inode table drops the name, the kept fd joins the handle cache
// (pinned until the kernel forgets the node), and the kernel-cache bookkeeping of an UNLINK is made.
import type { FastCreated, FastCreates } from '@agentfense/fuse-native';
import type { FastCreateSink } from '../delta/fast-dir.js';
import { RawFile } from '../host/raw-file.js';
import type { FsCore } from './core.js';

export interface NativeUnlinksOptions {
  readonly fast: FastCreates;
  readonly core: FsCore;
  readonly sink: FastCreateSink;
}

export class NativeUnlinks {
  readonly #fast: FastCreates;
  readonly #core: FsCore;
  readonly #sink: FastCreateSink;
  #counted = 0;

  constructor(options: NativeUnlinksOptions) {
    this.#fast = options.fast;
    this.#core = options.core;
    this.#sink = options.sink;
    this.#fast.unlinks = true;
  }

  /** The binding removed `c.name` from `c.parent` (or, `c.ino` 0, only journaled its removal). */
  adopt(c: FastCreated): void {
    const core = this.#core;
    const removed = c.ino !== 0;
    if (c.journalBytes > 0) this.#fast.adopted(1);
    const path = core.inodes.childPath(c.parent, c.name);
    if (path === null) {
      // the parent went meanwhile (it cannot while the kernel holds it): the record alone is kept
      if (c.fd !== -1) void new RawFile(c.fd).close();
      return;
    }
    this.#sink.unlinked(path, removed ? c.stIno : undefined, c.journalBytes);
    if (!removed) return;
    core.cache.replays.mutated();
    const node = core.inodes.child(c.parent, c.name);
    if (node === undefined || core.handles.get(node.ino, true) !== undefined) void new RawFile(c.fd).close();
    else core.handles.set(node.ino, new RawFile(c.fd), true);
    if (node !== undefined) core.handles.pin(node.ino);
    core.inodes.unlink(c.parent, c.name);
    // what namespace-ops.ts unlink does after the removal, in its order
    if (node !== undefined) core.nativeReads?.closing(node.ino);
    core.forgetListing(c.parent);
    if (node !== undefined) core.cache.entries.attrsStale(node.ino);
  }

  /** UNLINKs the binding answered since the mount. */
  get answered(): number {
    return this.#fast.unlinksServed;
  }

  /** Counts the UNLINKs answered since the last call as `unlink-native`. */
  count(): void {
    const served = this.#fast.unlinksServed;
    const stats = this.#core.stats;
    if (stats !== undefined)
      for (let i = this.#counted; i < served; i++) stats.record('unlink-native', 0, false);
    this.#counted = served;
  }
}
