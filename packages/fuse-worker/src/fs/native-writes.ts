// WRITEs answered by the binding, in C, without entering JS (fuse-native's FastWrites, native/fast.c).
//
// A WRITE the worker served (permission checked, caller accepted, quota charged) registers its node with
// the binding: the node's host fd. The node's later WRITEs are pwrite + reply in the binding's read loop
// until something could change the decision: the binding itself drops the registration at a SETATTR or
// FALLOCATE of the node and every one at a RENAME/LINK/UNLINK/RMDIR (a path, so a rule, may change); the
// worker drops them at a rule change and before it closes the fd. The next WRITE then comes here again
// and is decided as before. Audit: allowed accesses are recorded when a handle is opened, never per WRITE,
// so a WRITE served in C leaves exactly the records one served here would.
//
// Quota: the binding spends a grant of the free bytes (DiskQuota.lend), charging each WRITE the most it
// can add to the file (growthBound); a WRITE that does not fit comes here. Charges are folded into the
// exact counts (an fstat of the file) when the node's fd closes, when a check would fail and before a
// checkpoint (DiskQuota.settle); STATFS counts them at their bounds (DiskQuota.freeBound).
import { fstatSync } from 'node:fs';
import type { FastWrites, LowLevelFuse } from '@agentfense/fuse-native';
import type { DiskQuota, QuotaBorrower } from '../delta/quota.js';
import type { HandleCache } from './handles.js';
import type { KernelCache } from './kernel-cache.js';
import type { OpStats } from './op-stats.js';

/** The most the binding holds at once: a WRITE past it comes to the worker, which lends again. */
const GRANT_BYTES = 64 * 1024 * 1024;

export interface NativeWritesOptions {
  /** The mount whose binding answers the WRITEs. */
  readonly fuse: Pick<LowLevelFuse, 'fastWrites'>;
  readonly quota: () => DiskQuota | null;
  readonly handles: HandleCache;
  readonly cache: KernelCache;
  readonly stats: OpStats | undefined;
}

export class NativeWrites implements QuotaBorrower {
  readonly #fast: FastWrites;
  readonly #quota: () => DiskQuota | null;
  readonly #handles: HandleCache;
  readonly #cache: KernelCache;
  readonly #stats: OpStats | undefined;
  #answered = 0;

  constructor(options: NativeWritesOptions) {
    this.#fast = options.fuse.fastWrites((nodes, writes) => this.written(nodes, writes));
    this.#quota = options.quota;
    this.#handles = options.handles;
    this.#cache = options.cache;
    this.#stats = options.stats;
  }

  /** Besides root, the only caller uid the binding serves; undefined: any. */
  set callerUid(uid: number | undefined) {
    this.#fast.callerUid = uid;
  }

  /**
   * The worker has just served a WRITE to `ino` through `fd` (and counted the file in the quota): the
   * node's next WRITEs may be answered by the binding. `direct`: set-id bits are the worker's to clear.
   */
  served(ino: number, fd: number, direct: boolean): void {
    const quota = this.#quota();
    if (quota !== null && !quota.ready) return;
    if (this.#fast.register(ino, fd, direct) === -1) return;
    this.topUp();
  }

  /** Lends the binding a quota grant again when it runs low (its WRITEs and CREATEs are charged from it). */
  topUp(): void {
    const quota = this.#quota();
    if (quota !== null && !quota.ready) return;
    if (quota === null) {
      this.#fast.grant = Infinity;
    } else if (this.#fast.grant < GRANT_BYTES / 2) {
      this.#fast.grant = 0; // the unspent rest back first: `free` counts it as used
      this.#fast.grant = Math.min(GRANT_BYTES, quota.free);
    }
  }

  /** Before `fd` (node `ino`'s) closes: unregistered, and its charges folded while the fd is open. */
  closing(ino: number, fd: number): void {
    if (this.#fast.drop(ino) > 0) this.#record(fd);
  }

  /** The rules changed: no WRITE is answered on an earlier decision. */
  invalidate(): void {
    this.#fast.invalidate();
  }

  /** WRITEs the binding answered since the mount (reported at the end of each batch it wrote). */
  get answered(): number {
    return this.#answered;
  }

  /** The binding answered `writes` WRITEs to `nodes` since it last said: the kernel's caches changed. */
  written(nodes: Float64Array, writes: number): void {
    this.#answered += writes;
    // What the binding's serve() does around each WRITE: the kernel drops the file's size and mtime, and
    // no remembered listing may be replayed across a change.
    for (const ino of nodes) this.#cache.entries.attrsStale(ino);
    this.#cache.replays.mutated();
    if (this.#stats !== undefined)
      for (let i = 0; i < writes; i++) this.#stats.record('write-native', 0, false);
  }

  /** `bytes` the create fast path charged are in the quota's exact counts now (native-creates.ts). */
  settled(bytes: number): void {
    if (bytes > 0) this.#fast.settled(bytes);
  }

  spent(): number {
    return this.#fast.pending;
  }

  reserved(): number {
    const grant = this.#fast.grant;
    return (Number.isFinite(grant) ? grant : 0) + this.#fast.pending;
  }

  reclaim(): void {
    if (Number.isFinite(this.#fast.grant)) this.#fast.grant = 0;
    for (const ino of this.#fast.fold()) {
      const fd = this.#handles.get(ino, true)?.fd;
      if (fd !== undefined && fd !== -1) this.#record(fd);
    }
  }

  #record(fd: number): void {
    const quota = this.#quota();
    if (quota !== null) quota.record(fstatSync(fd, { bigint: true }));
  }
}
