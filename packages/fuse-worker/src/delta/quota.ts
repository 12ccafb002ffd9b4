// The per-sandbox disk quota on the delta: every upper entry is charged by the blocks it holds, the
// delta's metadata by its bytes, and an operation that would grow the delta past the limit fails with
// ENOSPC before it touches the disk.
import type { BigIntStats } from 'node:fs';
import { constants, fstatSync, lstatSync } from 'node:fs';

import { FsError } from '../errors.js';
import type { HostDir } from '../host/host-dir.js';
import { walkTree } from '../host/walk.js';

/** Every entry costs at least one block: an agent creating millions of empty files exhausts the disk too. */
export const MIN_CHARGE = 4096;

/** The block size bounds are computed in when the host's is unknown. */
const BLOCK = 4096;

/**
 * What an upper entry costs: the blocks it holds on the host (a sparse file only what it wrote; a
 * directory grows with its entries and keeps its size on ext4), at least MIN_CHARGE. A directory also
 * costs its size where the filesystem keeps entries without blocks (tmpfs).
 */
export function chargeOf(st: Pick<BigIntStats, 'size' | 'blocks' | 'mode'>): number {
  const blocks = Number(st.blocks) * 512;
  const isDir = (Number(st.mode) & constants.S_IFMT) === constants.S_IFDIR;
  return Math.max(blocks, isDir ? Number(st.size) : 0, MIN_CHARGE);
}

/**
 * The most that writing (or allocating) `length` bytes at `offset` of the file `st` can add to its
 * blocks: every block the range touches, less those a file without holes already holds (a file with
 * holes may hold none of them). The host's metadata blocks (an extent tree's) come on top, found by the
 * fstat after the write: a write may pass the quota by those, never by data.
 */
export function growthBound(
  st: Pick<BigIntStats, 'size' | 'blocks' | 'blksize'>,
  range: { readonly offset: number; readonly length: number },
): number {
  if (range.length <= 0) return 0;
  const bs = Number(st.blksize) > 0 ? Number(st.blksize) : BLOCK;
  const start = Math.floor(range.offset / bs) * bs;
  const end = Math.ceil((range.offset + range.length) / bs) * bs;
  const sizeEnd = Math.ceil(Number(st.size) / bs) * bs;
  const dense = Number(st.blocks) * 512 >= sizeEnd;
  return end - (dense ? Math.min(end, Math.max(start, sizeEnd)) : start);
}

/**
 * The charge of every inode of the upper tree at `upper` (hard links once), its root directory included:
 * the root holds a block on the host like any directory and grows with the names made in it (chargeDir
 * records it), so a count without it would disagree with the live one by that block. Missing: nothing.
 * The quota's recount and a frozen layer's measure (layer-bytes.ts) both use it.
 */
export async function upperCharges(upper: string): Promise<Map<bigint, number>> {
  const charges = new Map<bigint, number>();
  let root: BigIntStats;
  try {
    root = lstatSync(upper, { bigint: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return charges;
    throw err;
  }
  charges.set(root.ino, chargeOf(root));
  await walkTree(upper, {
    onEntry: (st) => {
      charges.set(st.ino, chargeOf(st));
    },
  });
  return charges;
}

/** The bytes a directory entry named `name` takes (ext4's: an 8-byte header, the name, 4-byte aligned). */
export function entryBytes(name: string): number {
  return (8 + Buffer.byteLength(name) + 3) & ~3;
}

/**
 * Charges per upper inode (hard links share one; their names are in their directories' blocks), summed,
 * plus the delta's metadata (its journal and snapshot). A growing operation is checked against a bound of
 * what it can add before it runs (`check`, `checkGrowth`); what it really added is recorded after, from
 * the host's own count (`record`). Recomputed from the upper tree when a delta is opened (`rescan`), in
 * the background: growing operations wait for it (`ready`), everything else (reads, lookups, removals'
 * bookkeeping) does not.
 */
export class DiskQuota {
  readonly limit: number;
  #used = 0;
  readonly #charges = new Map<bigint, number>();
  #ready = false;
  #scan: Promise<void> | undefined;
  #metadata: () => number = () => 0;
  #frozen = 0;
  #lent: QuotaBorrower | null = null;

  constructor(limit: number, frozen = 0) {
    if (!Number.isSafeInteger(limit) || limit < 0) {
      throw new TypeError(`diskQuotaBytes must be a non-negative integer (got ${limit})`);
    }
    this.limit = limit;
    this.frozen = frozen;
  }

  /**
   * Bytes the writable layer costs now (its entries and metadata), plus what is lent out (`lend`): an
   * upper bound until `settle`.
   */
  get used(): number {
    return this.#used + this.#metadata() + (this.#lent?.reserved() ?? 0);
  }

  /**
   * Lets `borrower` (the binding's write fast path, fs/native-writes.ts) spend part of what is free on
   * its own: what it holds counts as used until it gives it back (`reclaim`: every charge folded into
   * the exact counts, the unspent rest returned). A check that would fail makes it give back first, so
   * lending never refuses what the exact counts allow.
   */
  lend(borrower: QuotaBorrower | null): void {
    this.#lent = borrower;
  }

  /** Makes `used` exact: whatever is lent out is given back. */
  settle(): void {
    if ((this.#lent?.reserved() ?? 0) > 0) this.#lent?.reclaim();
  }

  /**
   * Bytes of the frozen layers this sandbox made (its checkpoints), which the control plane keeps: they
   * count against the same limit, so checkpointing in a loop cannot hold more than the quota on the host.
   */
  get frozen(): number {
    return this.#frozen;
  }

  set frozen(bytes: number) {
    if (!Number.isSafeInteger(bytes) || bytes < 0) {
      throw new TypeError(`frozenBytes must be a non-negative integer (got ${bytes})`);
    }
    this.#frozen = bytes;
  }

  /** Bytes still available. */
  get free(): number {
    return Math.max(0, this.limit - this.used - this.#frozen);
  }

  /**
   * Bytes available for `df`: as `free`, without what is lent but unspent, and with what the borrower
   * spent counted at its bound (at least what it added). No fold: a fold fstats every file written
   * since the last one, ~10 ms after a 739-file `tar -x`, for a figure `df` shows rounded anyway.
   */
  get freeBound(): number {
    const spent = this.#lent?.spent() ?? 0;
    return Math.max(0, this.limit - this.#used - this.#metadata() - spent - this.#frozen);
  }

  /** Charges the bytes `bytes()` answers at each check too (the delta's journal and snapshot). */
  chargeMetadata(bytes: () => number): void {
    this.#metadata = bytes;
  }

  /** True once the opening scan finished. */
  get ready(): boolean {
    return this.#ready;
  }

  /** Resolves when the opening scan is done (at once if it is). */
  async whenReady(): Promise<void> {
    if (!this.#ready) await this.#scan;
  }

  /** Starts recomputing the charges from the upper tree (replaces whatever was counted). */
  rescan(upper: HostDir, onError: (err: unknown) => void): Promise<void> {
    this.#ready = false;
    this.settle();
    const scan = (async () => {
      const charges = await upperCharges(upper.path);
      this.#charges.clear();
      this.#used = 0;
      for (const [ino, charge] of charges) this.set(ino, charge);
    })()
      .catch((err: unknown) => onError(err))
      .finally(() => {
        if (this.#scan === scan) this.#ready = true;
      });
    this.#scan = scan;
    return scan;
  }

  /**
   * Throws ENOSPC unless inode `ino` may grow to cost `next` (bytes; `null` ino = a new entry). Does not
   * record anything: callers record the real outcome with `set` after the operation.
   */
  check(ino: bigint | null, next: number, what: string): void {
    const current = ino === null ? 0 : (this.#charges.get(ino) ?? 0);
    this.checkGrowth(Math.max(next, MIN_CHARGE) - current, what);
  }

  /** Throws ENOSPC unless the delta may grow by `growth` bytes. Records nothing. */
  checkGrowth(growth: number, what: string): void {
    if (growth > 0 && this.used + this.#frozen + growth > this.limit) this.settle();
    const used = this.used + this.#frozen;
    if (growth > 0 && used + growth > this.limit) {
      throw new FsError(
        'ENOSPC',
        `${what}: the sandbox's disk quota of ${this.limit} bytes is used up (${used} used, ${this.#frozen} of it by checkpoints)`,
        // The control plane tells a quota from a full host filesystem by this (it names the data
        // directory only for the latter).
        { details: { quotaBytes: this.limit } },
      );
    }
  }

  /** Records what inode `ino` costs now. */
  set(ino: bigint, charge: number): void {
    const before = this.#charges.get(ino) ?? 0;
    this.#charges.set(ino, charge);
    this.#used += charge - before;
  }

  /** Records an lstat/fstat of an upper entry. */
  record(st: Pick<BigIntStats, 'ino' | 'size' | 'blocks' | 'mode'>): void {
    this.set(st.ino, chargeOf(st));
  }

  /** Whether inode `ino` is charged (a recount may not have reached it yet). */
  has(ino: bigint): boolean {
    return this.#charges.has(ino);
  }

  /** The inode's last name went away: it costs nothing from now on. */
  release(ino: bigint): void {
    const before = this.#charges.get(ino);
    if (before === undefined) return;
    this.#charges.delete(ino);
    this.#used -= before;
  }
}

/** Who holds part of the free bytes (DiskQuota.lend). */
export interface QuotaBorrower {
  /** Bytes held: spent (charged, not yet folded) and unspent. */
  reserved(): number;
  /** Bytes spent: charged at each write's bound, not yet folded into the exact counts. */
  spent(): number;
  /** Folds every charge into the quota's exact counts and returns the unspent rest. */
  reclaim(): void;
}

/**
 * Runs the synchronous `write` (or allocation) of `length` bytes at `offset` on host fd `fd` within the
 * quota: ENOSPC before a byte is written when the blocks it may add do not fit (growthBound); the file's
 * new cost, from a second fstat, recorded after. `write` gets the first fstat's result, so it need not
 * make its own (a write clearing set-id bits reads the mode from it).
 */
export function writeWithin(
  quota: DiskQuota,
  fd: number,
  range: { readonly offset: number; readonly length: number },
  what: string,
  write: (before: BigIntStats) => number,
): number {
  const st = fstatSync(fd, { bigint: true });
  if (!quota.has(st.ino)) quota.record(st);
  quota.checkGrowth(growthBound(st, range), what);
  try {
    return write(st);
  } finally {
    quota.record(fstatSync(fd, { bigint: true }));
  }
}

/** statfs numbers with the quota as the filesystem's size (the host's free space caps what is left). */
export function quotaStatfs<T extends { bsize: number; blocks: number; bfree: number; bavail: number }>(
  quota: DiskQuota,
  host: T,
): T {
  const bsize = host.bsize > 0 ? host.bsize : 4096;
  const free = Math.floor(quota.freeBound / bsize);
  return {
    ...host,
    blocks: Math.ceil(quota.limit / bsize),
    bfree: Math.min(free, host.bfree),
    bavail: Math.min(free, host.bavail),
  };
}
