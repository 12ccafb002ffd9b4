// The lookup fast path's JS face (native/fast-entries.c): a LOOKUP of a missing name in a directory
// marked here is answered in C, without entering JS, as a negative entry the kernel does not cache.
import { addon, type SessionHandle } from './addon.js';

/** Indices into the state array C shares with JS (FE_* in native/fast-entries.h). */
const GEN = 0;
const CALLER_UID = 1;
const SERVED = 2;
const STATE_LENGTH = 4;

export class FastEntries {
  readonly #session: SessionHandle;
  /** Shared memory: C reads and writes it on the JS thread while it decodes requests. */
  readonly #state = new Float64Array(new SharedArrayBuffer(STATE_LENGTH * 8));

  /** `codebaseRootFd`: C checks at each answer that the codebase still lacks the marked directory. */
  constructor(session: SessionHandle, codebaseRootFd: number) {
    this.#session = session;
    this.#state[CALLER_UID] = -1;
    addon.ll_fentry_init(session, this.#state, codebaseRootFd);
  }

  /** Besides root, the only caller uid C serves (the others go to JS); undefined: any. */
  set callerUid(uid: number | undefined) {
    this.#state[CALLER_UID] = uid ?? -1;
  }

  /** The marks' generation: a mark made under an older one is no longer served. */
  get generation(): number {
    return this.#state[GEN]!;
  }

  /** LOOKUPs answered in C since the mount. */
  get served(): number {
    return this.#state[SERVED]!;
  }

  /**
   * Marks node `ino`, the directory at `rel` (relative, no leading '/') below the writable layer's root
   * `upperRootFd`: C opens it beneath that root without following any symlink. False: not marked.
   * `stIno` not 0: the create fast path may answer the directory's GETATTRs too, showing that st_ino
   * (FastCreates.dirAttrs).
   */
  mark(ino: number, upperRootFd: number, rel: string, stIno = 0): boolean {
    return addon.ll_fentry_mark(this.#session, ino, upperRootFd, rel, stIno);
  }

  /** The node's mark goes (the kernel forgot it). */
  unmark(ino: number): void {
    addon.ll_fentry_unmark(this.#session, ino);
  }

  /** No mark made before this is served again (rules, layers or the kernel's caches change). */
  revoke(): void {
    this.#state[GEN] = this.#state[GEN]! + 1;
  }
}
