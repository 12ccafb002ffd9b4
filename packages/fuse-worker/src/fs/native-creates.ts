// CREATEs answered by the binding, in C, without entering JS (fuse-native's FastCreates,
// native/fast-create.c).
//
// Only in directories the lookup fast path marked (native-lookups.ts: only the writable layer holds the
// directory, every path below it is `write`, the codebase lacks it; the same revocations), only for plain
// printable-ASCII names, only while the audit records no allowed access (a CREATE JS serves records one),
// and only with the write fast path on (the new file is registered with it at once, and its quota grant
// pays the create). The binding does what namespace-ops.ts create does, in the same order: the add's
// journal record (delta/journal.ts, the same line JSON.stringify makes, one write(2) before the file
// exists), the file made O_EXCL | O_NOFOLLOW in the directory's own fd, given to the caller, and the entry
// answered with the host's attributes. Each entry made there is handed over here before the worker gets
// its next request (`adopt`): the record joins the delta's state, the node (an id this lent) the inode
// table, the fd the handle cache, the file and the directory the quota's exact counts; the kernel-cache
// bookkeeping a CREATE makes is made.
import type { FastCreated, FastCreates, LowLevelFuse } from '@agentfense/fuse-native';
import type { FastCreateSink } from '../delta/fast-dir.js';
import { RawFile } from '../host/raw-file.js';
import type { FsCore } from './core.js';
import { registerIfReadable } from './native-reads.js';
import { NativeListings } from './native-listings.js';
import { NativeRmdirs } from './native-rmdirs.js';
import { NativeUnlinks } from './native-unlinks.js';
import type { NativeWrites } from './native-writes.js';

/** Node ids lent at a time; a CREATE past them comes to the worker, and more are lent at the next report. */
const LEND_IDS = 4096;

export interface NativeCreatesOptions {
  readonly fuse: Pick<LowLevelFuse, 'fastCreates'>;
  readonly core: FsCore;
  readonly sink: FastCreateSink;
  /** The attribute timeout GETATTR and SETATTR answers carry (the binding's, fs/binding.ts). */
  readonly attrTtl: number;
  /** The write fast path, whose quota grant pays the creates (native-writes.ts). */
  readonly writes: Pick<NativeWrites, 'settled' | 'topUp'>;
}

export class NativeCreates {
  readonly #fast: FastCreates;
  readonly #core: FsCore;
  readonly #sink: FastCreateSink;
  readonly #writes: Pick<NativeWrites, 'settled' | 'topUp'>;
  #counted = 0;
  #countedAttrs = 0;
  #countedXattrs = 0;
  #unlinks: NativeUnlinks | undefined;
  #rmdirs: NativeRmdirs | undefined;
  #listings: NativeListings | undefined;

  constructor(options: NativeCreatesOptions) {
    this.#fast = options.fuse.fastCreates((created) => this.adopt(created));
    this.#core = options.core;
    this.#sink = options.sink;
    this.#writes = options.writes;
    this.#fast.ttl = options.core.ttl;
    this.#fast.attrTtl = options.attrTtl;
    this.#sink.watchJournal(
      (fd) => {
        this.#fast.journalFd = fd;
      },
      () => this.#fast.unadopted,
    );
    this.#lend();
    this.refresh();
  }

  /** Besides root, the only caller uid the binding serves; undefined: any. */
  set callerUid(uid: number | undefined) {
    this.#fast.callerUid = uid;
  }

  /**
   * Lets the binding answer GETATTRs of directories marked with an st_ino (native-lookups.ts dirAttrs,
   * the nativeDirAttrs feature).
   */
  set dirAttrs(on: boolean) {
    this.#fast.dirAttrs = on;
  }

  /** Lets the binding answer UNLINKs where it answers CREATEs too (native-unlinks.ts, nativeUnlinks). */
  useUnlinks(): void {
    this.#unlinks ??= new NativeUnlinks({ fast: this.#fast, core: this.#core, sink: this.#sink });
  }

  /** Lets the binding answer RMDIRs of empty directories where it answers UNLINKs (native-rmdirs.ts). */
  useRmdirs(): void {
    this.#rmdirs ??= new NativeRmdirs({ fast: this.#fast, core: this.#core, sink: this.#sink });
  }

  /**
   * Lets the binding answer READDIRPLUS and READDIR of directories marked with an st_ino, with plain
   * entries (native-listings.ts, nativeListings; after dirAttrs).
   */
  useListings(): void {
    this.#listings ??= new NativeListings({ fast: this.#fast, core: this.#core });
  }

  /** Serves creates while the audit records no allowed access; the direct I/O choice follows the worker's. */
  refresh(): void {
    this.#fast.on = !this.#core.audit.allowed;
    this.#fast.directWrites = this.#core.directWrites;
    this.#writes.topUp();
    this.#listings?.refresh();
  }

  /** The binding made (or began) these entries: the worker's state takes them in, in order. */
  adopt(created: readonly FastCreated[]): void {
    const core = this.#core;
    for (const c of created) {
      if (c.unlinked) {
        this.#unlinks?.adopt(c);
        continue;
      }
      if (c.removedDir) {
        this.#rmdirs?.adopt(c);
        continue;
      }
      if (c.listed) {
        this.#listings?.adopt(c);
        continue;
      }
      if (c.dirAttr) {
        // a GETATTR of a marked directory answered there: the kernel holds its attributes fresh
        core.cache.dirAttrs.note(c.ino, core.ttl);
        continue;
      }
      if (c.parent === 0) {
        // a SETATTR answered on a file made there: what serving it here notes about the kernel's caches
        core.cache.entries.attrsSent(c.ino, core.ttl);
        core.cache.replays.mutated();
        continue;
      }
      if (c.journalBytes > 0) this.#fast.adopted(1);
      const path = core.inodes.childPath(c.parent, c.name);
      if (path === null) {
        // the parent went meanwhile (it cannot while the kernel holds it): the record alone is kept
        if (c.fd !== -1) void new RawFile(c.fd).close();
        continue;
      }
      this.#sink.created(path, c.fd, c.journalBytes);
      if (c.ino === 0) continue;
      this.#writes.settled(c.charge);
      core.inodes.adopt(c.parent, c.name, c.ino, c.stIno);
      core.handles.set(c.ino, new RawFile(c.fd), true);
      // tar's extract, then grep: the file's WRITEs were all answered there, so no WRITE registers it
      registerIfReadable(core, c.ino, c.fd);
      if (c.directIo) core.directWriters.add(c.ino);
      core.forgetListing(c.parent);
      core.cache.entries.entrySent(c.ino, core.ttl, core.cache.generation);
      core.cache.replays.mutated();
    }
    if (this.#fast.idsLeft < LEND_IDS / 2) this.#lend();
    this.refresh();
  }

  /** CREATEs, GETATTRs, SETATTRs, UNLINKs, RMDIRs and listings the binding answered since the mount. */
  get answered(): number {
    return (
      this.#fast.served +
      this.#fast.attrsServed +
      this.#fast.xattrsServed +
      (this.#unlinks?.answered ?? 0) +
      (this.#rmdirs?.answered ?? 0) +
      (this.#listings?.answered ?? 0)
    );
  }

  /**
   * Counts what the binding answered since the last call: `create-native`, `attr-native` (GETATTR,
   * SETATTR), `xattr-native` (SETXATTR, REMOVEXATTR).
   */
  count(): void {
    const served = this.#fast.served;
    const attrs = this.#fast.attrsServed;
    const xattrs = this.#fast.xattrsServed;
    const stats = this.#core.stats;
    if (stats !== undefined) {
      for (let i = this.#counted; i < served; i++) stats.record('create-native', 0, false);
      for (let i = this.#countedAttrs; i < attrs; i++) stats.record('attr-native', 0, false);
      for (let i = this.#countedXattrs; i < xattrs; i++) stats.record('xattr-native', 0, false);
    }
    this.#counted = served;
    this.#countedAttrs = attrs;
    this.#countedXattrs = xattrs;
    this.#unlinks?.count();
    this.#rmdirs?.count();
    this.#listings?.count();
  }

  #lend(): void {
    this.#fast.lendIds(this.#core.inodes.lendIds(LEND_IDS), LEND_IDS);
  }
}
