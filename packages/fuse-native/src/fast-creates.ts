// The create fast path's JS face (native/fast-create.c): CREATEs in directories the lookup fast path marked
// are answered in C, within node ids, a journal and a quota grant JS lends; each entry made there is
// reported before the next request reaches a handler.
import { addon, type SessionHandle } from './addon.js';

/** Indices into the state array C shares with JS (FC_* in native/fast-create.h). */
const ON = 0;
const NEXT = 1;
const END = 2;
const JOURNAL_FD = 3;
const TTL = 4;
const DIRECT = 5;
const CALLER_UID = 6;
const UNADOPTED = 7;
const SERVED = 8;
const ATTR_TTL = 9;
const ATTRS_SERVED = 10;
const DIR_ATTRS = 11;
const UNLINKS = 12;
const UNLINKS_SERVED = 13;
const RMDIRS = 14;
const RMDIRS_SERVED = 15;
const LISTINGS = 16;
const LISTINGS_SERVED = 17;
const SKIP_PID = 18;
const XATTRS_SERVED = 19;
const STATE_LENGTH = 20;
/** Doubles per reported entry (FCR_* in native/fast-create.h). */
const ROW = 8;
/** FCRK_DIR_ATTR, FCRK_UNLINK, FCRK_RMDIR, FCRK_LISTING: the row's kind column. */
const KIND_DIR_ATTR = 2;
const KIND_UNLINK = 3;
const KIND_RMDIR = 4;
const KIND_LISTING = 5;

/**
 * One CREATE the binding answered (or began: `ino` 0 means only its journal record was written), or, with
 * `parent` 0, a SETATTR it answered on node `ino` (one it made) or, with `dirAttr`, a GETATTR it answered
 * of directory `ino` (nothing else is set), or, with `unlinked`, an UNLINK of `name` in `parent`
 * (native/fast-unlink.c: `ino` 1 when the name was removed, 0 when only its record was written; `fd` the
 * file kept open, `stIno` its host st_ino), or, with `removedDir`, an RMDIR of `name` in `parent`
 * (native/fast-rmdir.c: `ino` 1 when the directory was removed; `stIno` its host st_ino; `fd` the journal
 * records written: 1, the removal's, or 2, the removal's and then, its rmdir(2) failed, the add's again),
 * or, with `listed`, a listing of directory `ino` from offset 0 answered in C (native/fast-listing.c: `fd`
 * 1 when it holds a regular file).
 */
export interface FastCreated {
  /** The node id answered (taken from the lent range); 0: the create went on to the handler. */
  readonly ino: number;
  /** The directory; 0: a SETATTR of `ino`'s mode or times, or a directory's GETATTR (`dirAttr`). */
  readonly parent: number;
  /** A GETATTR of marked directory `ino` answered in C: the kernel holds its attributes fresh. */
  readonly dirAttr: boolean;
  /** An UNLINK answered (or begun) in C. */
  readonly unlinked: boolean;
  /** An RMDIR answered (or begun) in C. */
  readonly removedDir: boolean;
  /** A listing of directory `ino` from offset 0 answered in C. */
  readonly listed: boolean;
  readonly name: string;
  /** The host fd of the new file (read-write), now the caller's to keep and close; -1 when `ino` is 0. */
  readonly fd: number;
  /** The st_ino the kernel was given. */
  readonly stIno: number;
  /** Quota bytes charged from the write fast path's grant (to hand back once the entry is counted). */
  readonly charge: number;
  /** Answered with direct I/O. */
  readonly directIo: boolean;
  /** Bytes of the journal record written (the add's base record), 0: none. */
  readonly journalBytes: number;
}

export class FastCreates {
  /** Shared memory: C reads and writes it on the JS thread while it decodes requests. */
  readonly #state = new Float64Array(new SharedArrayBuffer(STATE_LENGTH * 8));

  constructor(session: SessionHandle, onCreates: (created: FastCreated[]) => void) {
    this.#state[JOURNAL_FD] = -1;
    this.#state[CALLER_UID] = -1;
    this.#state[SKIP_PID] = -1;
    addon.ll_fcreate_init(session, this.#state, (rows, names) => {
      const parts = names.split('/');
      const created: FastCreated[] = [];
      let named = 0;
      for (let i = 0; i * ROW < rows.length; i++) {
        const r = i * ROW;
        const parent = rows[r + 1]!;
        created.push({
          ino: rows[r]!,
          parent,
          fd: rows[r + 2]!,
          stIno: rows[r + 3]!,
          charge: rows[r + 4]!,
          directIo: rows[r + 5] === 1,
          journalBytes: rows[r + 6]!,
          dirAttr: rows[r + 7] === KIND_DIR_ATTR,
          unlinked: rows[r + 7] === KIND_UNLINK,
          removedDir: rows[r + 7] === KIND_RMDIR,
          listed: rows[r + 7] === KIND_LISTING,
          name: parent === 0 ? '' : parts[named++]!,
        });
      }
      onCreates(created);
    });
  }

  /** Whether CREATEs are answered in C at all. */
  set on(on: boolean) {
    this.#state[ON] = on ? 1 : 0;
  }

  /** Node ids C may still take: [next, end). */
  get idsLeft(): number {
    return this.#state[END]! - this.#state[NEXT]!;
  }

  /** Lends the ids [first, first + count) (replacing what was left). */
  lendIds(first: number, count: number): void {
    this.#state[NEXT] = first;
    this.#state[END] = first + count;
  }

  /** The delta journal's fd C appends the adds' records to; -1: none (nothing is served). */
  set journalFd(fd: number) {
    this.#state[JOURNAL_FD] = fd;
  }

  /** Entry and attribute timeout of the CREATE answers, in seconds. */
  set ttl(seconds: number) {
    this.#state[TTL] = seconds;
  }

  /** Attribute timeout of the GETATTR and SETATTR answers, in seconds. */
  set attrTtl(seconds: number) {
    this.#state[ATTR_TTL] = seconds;
  }

  /**
   * Whether GETATTRs of directories marked with an st_ino (FastEntries.mark) are answered in C, from an
   * fstat of the directory's own fd.
   */
  set dirAttrs(on: boolean) {
    this.#state[DIR_ATTRS] = on ? 1 : 0;
  }

  /**
   * Whether UNLINKs of regular files in marked directories are answered in C (native/fast-unlink.c),
   * where a CREATE would be.
   */
  set unlinks(on: boolean) {
    this.#state[UNLINKS] = on ? 1 : 0;
  }

  /** UNLINKs answered in C since the mount. */
  get unlinksServed(): number {
    return this.#state[UNLINKS_SERVED]!;
  }

  /**
   * Whether RMDIRs of empty directories in marked directories are answered in C (native/fast-rmdir.c),
   * where an UNLINK would be.
   */
  set rmdirs(on: boolean) {
    this.#state[RMDIRS] = on ? 1 : 0;
  }

  /** RMDIRs answered in C since the mount. */
  get rmdirsServed(): number {
    return this.#state[RMDIRS_SERVED]!;
  }

  /**
   * Whether READDIRPLUS and READDIR of marked directories answered in C (FastEntries.mark with an st_ino)
   * are (native/fast-listing.c), with plain entries.
   */
  set listings(on: boolean) {
    this.#state[LISTINGS] = on ? 1 : 0;
  }

  /** Listing requests answered in C since the mount. */
  get listingsServed(): number {
    return this.#state[LISTINGS_SERVED]!;
  }

  /** A pid whose requests as root no listing in C answers (the entry warm-up's walker); undefined: none. */
  set skipPid(pid: number | undefined) {
    this.#state[SKIP_PID] = pid ?? -1;
  }

  /** GETATTRs and SETATTRs answered in C since the mount. */
  get attrsServed(): number {
    return this.#state[ATTRS_SERVED]!;
  }

  /** SETXATTRs and REMOVEXATTRs of the files it made answered in C (EOPNOTSUPP) since the mount. */
  get xattrsServed(): number {
    return this.#state[XATTRS_SERVED]!;
  }

  /** Whether write-only creates are answered with direct I/O (the worker's directWrites). */
  set directWrites(on: boolean) {
    this.#state[DIRECT] = on ? 1 : 0;
  }

  /** Besides root, the only caller uid C serves (the others go to JS); undefined: any. */
  set callerUid(uid: number | undefined) {
    this.#state[CALLER_UID] = uid ?? -1;
  }

  /** Journal records C wrote that no report has handed over yet. */
  get unadopted(): number {
    return this.#state[UNADOPTED]!;
  }

  /** `count` records were adopted from a report. */
  adopted(count: number): void {
    this.#state[UNADOPTED] = this.#state[UNADOPTED]! - count;
  }

  /** CREATEs answered in C since the mount. */
  get served(): number {
    return this.#state[SERVED]!;
  }
}
