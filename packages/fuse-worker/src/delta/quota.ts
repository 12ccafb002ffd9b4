// The per-sandbox disk quota on the delta (issue 12 row 4): every upper entry is charged, and an operation
// that would grow the delta past the limit fails with ENOSPC before it touches the disk.
import type { BigIntStats } from 'node:fs';
import { fstatSync } from 'node:fs';

import { FsError } from '../errors.js';
import type { HostDir } from '../host/host-dir.js';
import { walkTree } from '../host/walk.js';

/** Every entry costs at least one block: an agent creating millions of empty files exhausts the disk too. */
export const MIN_CHARGE = 4096;

/** What an upper entry costs: its apparent size, or its allocated blocks when more (fallocate KEEP_SIZE). */
export function chargeOf(st: Pick<BigIntStats, 'size' | 'blocks'>): number {
  return Math.max(Number(st.size), Number(st.blocks) * 512, MIN_CHARGE);
}

/**
 * Charges per upper inode (hard links share one), summed. Apparent sizes make every check exact before
 * the fact: a write ending at E makes the file cost max(cost, E), whatever holes it fills; a sparse file
 * costs its full size, which over-counts only in the host's favour.
 * Recomputed from the upper tree when a delta is opened (`scan`), in the background: growing operations
 * wait for it (`ready`), everything else (reads, lookups, removals' bookkeeping) does not.
 */
export class DiskQuota {
  readonly limit: number;
  #used = 0;
  readonly #charges = new Map<bigint, number>();
  #ready = false;
  #scan: Promise<void> | undefined;

  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 0) {
      throw new TypeError(`diskQuotaBytes must be a non-negative integer (got ${limit})`);
    }
    this.limit = limit;
  }

  /** Bytes charged now. */
  get used(): number {
    return this.#used;
  }

  /** Bytes still available. */
  get free(): number {
    return Math.max(0, this.limit - this.#used);
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
    const scan = (async () => {
      const charges = new Map<bigint, number>();
      await walkTree(upper.path, {
        onEntry: (st) => {
          charges.set(st.ino, chargeOf(st));
        },
      });
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
    const growth = Math.max(next, MIN_CHARGE) - current;
    if (growth > 0 && this.#used + growth > this.limit) {
      throw new FsError(
        'ENOSPC',
        `${what}: the sandbox's disk quota of ${this.limit} bytes is used up (${this.#used} used)`,
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
  record(st: Pick<BigIntStats, 'ino' | 'size' | 'blocks'>): void {
    this.set(st.ino, chargeOf(st));
  }

  /** The inode's last name went away: it costs nothing from now on. */
  release(ino: bigint): void {
    const before = this.#charges.get(ino);
    if (before === undefined) return;
    this.#charges.delete(ino);
    this.#used -= before;
  }
}

/**
 * Runs the synchronous `write` of `length` bytes at `offset` on host fd `fd` within the quota: ENOSPC
 * before a byte is written when the file would grow past it; the file's new cost recorded after.
 */
export function writeWithin(
  quota: DiskQuota,
  fd: number,
  range: { readonly offset: number; readonly length: number },
  what: string,
  write: () => number,
): number {
  const st = fstatSync(fd, { bigint: true });
  quota.check(st.ino, range.offset + range.length, what);
  const written = write();
  quota.set(st.ino, Math.max(chargeOf(st), range.offset + written));
  return written;
}

/** statfs numbers with the quota as the filesystem's size (the host's free space caps what is left). */
export function quotaStatfs<T extends { bsize: number; blocks: number; bfree: number; bavail: number }>(
  quota: DiskQuota,
  host: T,
): T {
  const bsize = host.bsize > 0 ? host.bsize : 4096;
  const free = Math.floor(quota.free / bsize);
  return {
    ...host,
    blocks: Math.ceil(quota.limit / bsize),
    bfree: Math.min(free, host.bfree),
    bavail: Math.min(free, host.bavail),
  };
}
