// A low-level (inode based) libfuse 3 mount: handlers answer requests whenever they are ready (README.md).
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { addon, type RequestHandle, type SessionHandle } from './addon.js';
import { setattrChanges, toNameBuffer } from './encode.js';
import { OP, implementedMask } from './ops.js';
import { FastReads, type FastReadReport } from './fast-reads.js';
import { FastCreates, type FastCreated } from './fast-creates.js';
import { FastEntries } from './fast-entries.js';
import { FastWrites } from './fast-writes.js';
import { FEATURES, buildArgs, describeFeatures, type MountArgs } from './options.js';
import { Req } from './req.js';
import type { ConnInfo, LowLevelHandlers, LowLevelOptions } from './types.js';
import { runUnmount } from './unmount.js';

const EIO = 5;
const ENOSYS = 38;
/** Notification kinds (NOTIFY_* in native/ll.h). */
const NOTIFY_INVAL_INODE = 1;
const NOTIFY_INVAL_ENTRY = 2;
const NOTIFY_DELETE = 3;
const NOTIFY_STORE = 4;

type State = 'new' | 'mounting' | 'mounted' | 'failed' | 'unmounting' | 'unmounted';

function defaultOnError(err: unknown): void {
  console.error('fuse-native: handler failed (request answered EIO):', err);
}

export class LowLevelFuse {
  readonly mountpoint: string;
  /** what INIT negotiated; null until mounted */
  connInfo: ConnInfo | null = null;
  readonly #handlers: LowLevelHandlers;
  readonly #built: MountArgs;
  readonly #onError: (err: unknown) => void;
  /** attributes and statfs replies cross through it (encode.ts putAttr, native/reply.c) */
  readonly #scratch = new Float64Array(16);
  readonly #session: SessionHandle;
  /** store-ahead's epoch, read by the fetch threads (shared memory: never moves) */
  readonly #storeEpoch = new Int32Array(new SharedArrayBuffer(4));
  #state: State = 'new';
  #closed: Promise<void> | null = null;

  constructor(mountpoint: string, handlers: LowLevelHandlers, options: LowLevelOptions = {}) {
    if (typeof mountpoint !== 'string' || mountpoint.length === 0) {
      throw new TypeError('LowLevelFuse: mountpoint must be a non-empty string');
    }
    if (handlers === null || typeof handlers !== 'object')
      throw new TypeError('LowLevelFuse: handlers must be an object');
    if (options === null || typeof options !== 'object')
      throw new TypeError('LowLevelFuse: options must be an object');
    if (options.onError !== undefined && typeof options.onError !== 'function') {
      throw new TypeError('LowLevelFuse: onError must be a function');
    }
    this.mountpoint = resolve(mountpoint);
    this.#handlers = handlers;
    this.#built = buildArgs(options);
    // READDIRPLUS is asked for only when there is a handler to answer it
    if (typeof handlers.readdirplus !== 'function') this.#built.features &= ~FEATURES.readdirplus;
    this.#onError = options.onError ?? defaultOnError;
    this.#session = addon.ll_new(this.#dispatch.bind(this), this.#scratch, implementedMask(handlers));
    addon.ll_store_epoch(this.#session, this.#storeEpoch);
  }

  /** Resolves once the kernel's INIT was handled; rejects with an Error on failure. */
  async mount(): Promise<ConnInfo> {
    if (this.#state !== 'new') throw new Error(`LowLevelFuse: cannot mount in state ${this.#state}`);
    this.#state = 'mounting';
    const where = this.mountpoint;
    const st = await stat(where).catch((err: Error) => {
      this.#state = 'failed';
      throw new Error(`LowLevelFuse: mountpoint ${where} is not accessible: ${err.message}`, { cause: err });
    });
    if (!st.isDirectory()) {
      this.#state = 'failed';
      throw new Error(`LowLevelFuse: mountpoint ${where} is not a directory`);
    }
    const { args, features, maxWrite } = this.#built;
    try {
      const info = await addon.ll_mount(this.#session, where, args, features, maxWrite);
      const libfuseVersion = addon.libfuse_version;
      this.connInfo = { ...info, libfuseVersion, features: describeFeatures(info, this.#handlers) };
    } catch (err) {
      this.#state = 'failed';
      throw new Error(`LowLevelFuse: mounting ${where} failed: ${(err as Error).message}`, { cause: err });
    }
    this.#state = 'mounted';
    this.#closed = addon.ll_closed(this.#session);
    return this.connInfo;
  }

  /**
   * Unmounts with fusermount (argv array, no shell; lazy: -uz), then waits until the device read loop has
   * stopped, the binding's threads are joined and libfuse's session is freed. Idempotent.
   */
  async unmount(opts: { lazy?: boolean } = {}): Promise<void> {
    if (this.#state === 'unmounted') return;
    if (this.#state !== 'mounted') throw new Error(`LowLevelFuse: cannot unmount in state ${this.#state}`);
    this.#state = 'unmounting';
    try {
      await runUnmount(this.mountpoint, opts.lazy === true);
    } catch (err) {
      this.#state = 'mounted';
      throw err;
    }
    await this.#closed;
    this.#state = 'unmounted';
  }

  /**
   * Notifications resolve with 0 or a positive errno (ENOENT: the kernel had nothing cached; ENOTCONN: not
   * mounted). They never reject and never block the JS thread: they run on the binding's notifier thread
   * (native/notify.c says why). offset 0, length 0 = attributes and all cached pages; offset < 0 =
   * attributes only.
   */
  notifyInvalInode(ino: number, offset = 0, length = 0): Promise<number> {
    return addon.ll_notify(this.#session, NOTIFY_INVAL_INODE, ino, offset, length);
  }

  notifyInvalEntry(parent: number, name: Buffer | string): Promise<number> {
    return addon.ll_notify(this.#session, NOTIFY_INVAL_ENTRY, parent, 0, 0, toNameBuffer(name));
  }

  notifyDelete(parent: number, child: number, name: Buffer | string): Promise<number> {
    return addon.ll_notify(this.#session, NOTIFY_DELETE, parent, child, 0, toNameBuffer(name));
  }

  /**
   * FUSE_NOTIFY_STORE: `data` into the kernel's page cache of inode `ino` at `offset`, as a READ would put
   * it; pages past the old end grow the kernel's size. Store only what a READ of that inode would return
   * right then. The data is copied before this returns.
   */
  notifyStore(ino: number, offset: number, data: Uint8Array): Promise<number> {
    if (!(data instanceof Uint8Array)) throw new TypeError('data must be a Buffer or Uint8Array');
    const buf = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    return addon.ll_notify(this.#session, NOTIFY_STORE, ino, offset, 0, buf);
  }

  /**
   * Store-ahead: each regular file `name` (one path component) in the directory open as `dirFd` is read
   * whole on a fetch thread and stored into the page cache of node `nodes[i]` if it is still exactly its
   * `version` (`ino:size:mtimeNs:ctimeNs`, checked before and after the read), smaller than `maxBytes`, and
   * no bumpStoreEpoch() came between this call and the store; node 0: only the host's read-ahead of its
   * first `maxBytes` is started. `strings`: `name\0version\0` per node. Once all are done, resolves with one
   * status byte per node: 1 stored, 2 the kernel did not hold the node (not yet, or no more), 0 not stored;
   * never rejects. Keep `dirFd` open until then.
   */
  storeAhead(dirFd: number, maxBytes: number, nodes: Float64Array, strings: Buffer): Promise<Buffer> {
    return addon.ll_store_ahead(this.#session, dirFd, maxBytes, nodes, strings);
  }

  /**
   * Drops the stores of earlier storeAhead() calls that have not started; those in progress reach the
   * kernel before any notification asked for after this. Call it before every invalidation of file contents.
   */
  bumpStoreEpoch(): void {
    Atomics.add(this.#storeEpoch, 0, 1);
  }

  /**
   * Switches the write fast path on (native/fast.c; once): WRITEs on nodes registered with it are answered
   * in C. `onWrites` hears of the nodes so written before the next request reaches a handler.
   */
  fastWrites(onWrites: (nodes: Float64Array, writes: number) => void): FastWrites {
    return new FastWrites(this.#session, onWrites);
  }

  /**
   * Switches the read fast path on (native/fast-read.c; once): READs of nodes registered with it are
   * answered in C from the host's page cache. `callerUid`: besides root, the only
   * uid served there (undefined: any). `onReads` hears of the nodes so read before the next request.
   */
  fastReads(callerUid: number | undefined, onReads: (reads: FastReadReport) => void): FastReads {
    return new FastReads(this.#session, callerUid, onReads);
  }

  /**
   * Switches the lookup fast path on (native/fast-entries.c; once): LOOKUPs of missing names in marked
   * directories are answered in C while the codebase (its root fd here) still lacks the directory.
   */
  fastEntries(codebaseRootFd: number): FastEntries {
    return new FastEntries(this.#session, codebaseRootFd);
  }

  /**
   * From now on a RENAME whose source the binding finds not to be a directory (in a directory the lookup
   * fast path marked) keeps every mark and every other node's registrations, if the handler names the
   * nodes it moves and replaces (Req.settleRename; native/fast-rename.c). Once, after fastEntries.
   */
  narrowRenames(): void {
    addon.ll_frename_enable(this.#session);
  }

  /**
   * Switches the create fast path on (native/fast-create.c; once, after fastWrites and fastEntries):
   * CREATEs in directories the lookup fast path marked are answered in C. `onCreates` hears of every
   * entry so made before the next request reaches a handler.
   */
  fastCreates(onCreates: (created: FastCreated[]) => void): FastCreates {
    return new FastCreates(this.#session, onCreates);
  }

  #fail(req: Req | null, err: unknown): void {
    if (req !== null && !req.replied) {
      try {
        req.replyErr(EIO);
      } catch {
        // answered meanwhile: nothing to do
      }
    }
    try {
      this.#onError(err);
    } catch {
      // the error handler's own failure has nowhere to go
    }
  }

  /**
   * Called by the binding for every queued request, a batch at a time, inside one callback scope. Fixed
   * parameters (no rest arguments) keep the call monomorphic and allocation free; their types per op are
   * native/dispatch.c's.
   */
  #dispatch(
    op: number,
    h: RequestHandle | undefined,
    uid: number,
    gid: number,
    pid: number,
    a: unknown,
    b: unknown,
    c: unknown,
    d: unknown,
    e: unknown,
    f: unknown,
    g: unknown,
    i: unknown,
    j: unknown,
    k: unknown,
    l: unknown,
  ): void {
    const hd = this.#handlers;
    if (op === OP.forget || op === OP.forgetMulti) {
      try {
        if (op === OP.forget) hd.forget?.(a as number, b as number);
        else {
          const pairs = a as Float64Array;
          for (let x = 0; x < pairs.length; x += 2) hd.forget?.(n(pairs[x]), n(pairs[x + 1]));
        }
      } catch (err) {
        this.#fail(null, err);
      }
      return;
    }
    const listing = op === OP.readdir || op === OP.readdirplus;
    const data = op === OP.write ? (b as Buffer) : null;
    const req = new Req(this.#scratch, h as RequestHandle, uid, gid, pid, listing ? (b as number) : 0, data);
    let r: unknown;
    try {
      r = this.#call(req, op, a, b, c, d, e, f, g, i, j, k, l);
    } catch (err) {
      this.#fail(req, err);
      return;
    }
    // async handlers: a rejection must still answer the request
    if (isThenable(r)) r.then(undefined, (err: unknown) => this.#fail(req, err));
  }

  /** The handler of `op` with its arguments, typed as native/dispatch.c sends them. */
  #call(
    req: Req,
    op: number,
    a: unknown,
    b: unknown,
    c: unknown,
    d: unknown,
    e: unknown,
    f: unknown,
    g: unknown,
    i: unknown,
    j: unknown,
    k: unknown,
    l: unknown,
  ): unknown {
    const hd = this.#handlers as Required<LowLevelHandlers>;
    switch (op) {
      case OP.lookup:
        return hd.lookup(req, n(a), name(b));
      case OP.getattr:
        return hd.getattr(req, n(a), fh(b));
      case OP.setattr:
        return hd.setattr(
          req,
          n(a),
          setattrChanges(n(b), n(c), n(d), n(e), off(f), n(g), n(i), n(j), n(k)),
          fh(l),
        );
      case OP.readlink:
        return hd.readlink(req, n(a));
      case OP.mknod:
        return hd.mknod(req, n(a), name(b), n(c), n(d));
      case OP.mkdir:
        return hd.mkdir(req, n(a), name(b), n(c));
      case OP.unlink:
        return hd.unlink(req, n(a), name(b));
      case OP.rmdir:
        return hd.rmdir(req, n(a), name(b));
      case OP.symlink:
        return hd.symlink(req, name(a), n(b), name(c));
      case OP.rename:
        return hd.rename(req, n(a), name(b), n(c), name(d));
      case OP.link:
        return hd.link(req, n(a), n(b), name(c));
      case OP.open:
        return hd.open(req, n(a), n(b));
      case OP.read:
        return hd.read(req, n(a), n(b), off(c), n(d));
      case OP.write:
        return hd.write(req, n(a), name(b), off(c), n(d));
      case OP.flush:
        return hd.flush(req, n(a), n(b));
      case OP.release:
        return hd.release(req, n(a), n(b));
      case OP.fsync:
        return hd.fsync(req, n(a), b !== 0, n(c));
      case OP.opendir:
        return hd.opendir(req, n(a), n(b));
      case OP.readdir:
        return hd.readdir(req, n(a), n(b), n(c), n(d));
      case OP.readdirplus:
        return hd.readdirplus(req, n(a), n(b), n(c), n(d));
      case OP.releasedir:
        return hd.releasedir(req, n(a), n(b));
      case OP.fsyncdir:
        return hd.fsyncdir(req, n(a), b !== 0, n(c));
      case OP.statfs:
        return hd.statfs(req, n(a));
      case OP.setxattr:
        return hd.setxattr(req, n(a), str(b), name(c), n(d));
      case OP.getxattr:
        return hd.getxattr(req, n(a), str(b), n(c));
      case OP.listxattr:
        return hd.listxattr(req, n(a), n(b));
      case OP.removexattr:
        return hd.removexattr(req, n(a), str(b));
      case OP.access:
        return hd.access(req, n(a), n(b));
      case OP.create:
        return hd.create(req, n(a), name(b), n(c), n(d));
      case OP.fallocate:
        return hd.fallocate(req, n(a), n(b), off(c), off(d), fh(e));
      default:
        req.replyErr(ENOSYS); // unreachable: the binding answers ops without a handler itself
        return undefined;
    }
  }
}

// The dispatcher's arguments as what native/dispatch.c makes them (types only: no conversion).
const n = (v: unknown): number => v as number;
const str = (v: unknown): string => v as string;
const name = (v: unknown): Buffer => v as Buffer;
const off = (v: unknown): number | bigint => v as number | bigint;
const fh = (v: unknown): number | undefined => v as number | undefined;
const isThenable = (v: unknown): v is PromiseLike<unknown> =>
  v !== undefined && v !== null && typeof (v as PromiseLike<unknown>).then === 'function';
