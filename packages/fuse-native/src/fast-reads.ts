// The read fast path's JS face (native/fast-read.c): READs of a registered node are answered in C from the
// host's page cache, without entering JS.
import { addon, type SessionHandle } from './addon.js';

/** What C served since it last said: per node, whether a READ at offset 0 was among them. */
export interface FastReadReport {
  /** Pairs: node id, then 1 when a READ at offset 0 of it was served, else 0. */
  readonly pairs: Float64Array;
  /** READs served. */
  readonly reads: number;
}

export class FastReads {
  readonly #session: SessionHandle;

  constructor(
    session: SessionHandle,
    callerUid: number | undefined,
    onReads: (report: FastReadReport) => void,
  ) {
    this.#session = session;
    addon.ll_fast_read_init(session, callerUid ?? -1, (pairs, reads) => {
      onReads({ pairs, reads });
    });
  }

  /**
   * Registers node `ino` as readable through host fd `fd` on the decisions in force now (call it in the
   * same synchronous step as the permission check). False when nothing was registered (no regular file).
   */
  register(ino: number, fd: number): boolean {
    return addon.ll_fast_read_register(this.#session, ino, fd);
  }

  /** Unregisters a node before its fd is closed; whether it was registered. */
  drop(ino: number): boolean {
    return addon.ll_fast_read_drop(this.#session, ino);
  }

  /** Every registration made before this is no longer served (the rules changed). */
  invalidate(): void {
    addon.ll_fast_read_invalidate(this.#session);
  }
}
