// The write fast path's JS face (native/fast.c): WRITEs on a registered node are answered in C without
// entering JS, within a quota grant JS gives; what C charged waits here until JS folds it into its quota.
import { addon, type SessionHandle } from './addon.js';

/** Indices into the state array C shares with JS (FS_* in native/ll.h). */
const GRANT = 0;
const PENDING = 1;
const CALLER_UID = 2;
const STATE_LENGTH = 4;

export class FastWrites {
  readonly #session: SessionHandle;
  /** Shared memory: C reads and writes it on the JS thread while it decodes requests. */
  readonly #state = new Float64Array(new SharedArrayBuffer(STATE_LENGTH * 8));

  constructor(session: SessionHandle, onWrites: (nodes: Float64Array, writes: number) => void) {
    this.#session = session;
    this.#state[GRANT] = 0;
    this.#state[CALLER_UID] = -1;
    addon.ll_fast_init(session, this.#state, onWrites);
  }

  /** Quota bytes C may still charge; Infinity: nothing is charged (no quota). */
  get grant(): number {
    return this.#state[GRANT]!;
  }

  set grant(bytes: number) {
    this.#state[GRANT] = bytes;
  }

  /** Bytes C charged that no fold or drop has handed back yet (each write's most it can add). */
  get pending(): number {
    return this.#state[PENDING]!;
  }

  /** `bytes` of the pending charges are counted exactly now (the create fast path's, once adopted). */
  settled(bytes: number): void {
    this.#state[PENDING] = this.#state[PENDING]! - bytes;
  }

  /** Besides root, the only caller uid C serves (the others go to JS); undefined: any. */
  set callerUid(uid: number | undefined) {
    this.#state[CALLER_UID] = uid ?? -1;
  }

  /**
   * Registers node `ino` as written through host fd `fd` (C reads the file's size from it now; `direct`:
   * set-id bits are the worker's to clear on this node's writes). Returns the bytes the previous
   * registration had charged (the caller has just counted the file itself), or -1 when nothing was
   * registered (not a regular file).
   */
  register(ino: number, fd: number, direct: boolean): number {
    return addon.ll_fast_register(this.#session, ino, fd, direct);
  }

  /** Unregisters a node before its fd is closed; returns the bytes it had charged, -1 if none was. */
  drop(ino: number): number {
    return addon.ll_fast_drop(this.#session, ino);
  }

  /** Every registration made before this is no longer served (the rules changed). */
  invalidate(): void {
    addon.ll_fast_invalidate(this.#session);
  }

  /** The nodes with charges, which are handed back: the caller counts each file itself now. */
  fold(): Float64Array {
    return addon.ll_fast_fold(this.#session);
  }
}
