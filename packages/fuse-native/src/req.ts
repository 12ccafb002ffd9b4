// One FUSE request as handlers see it: the caller's credentials and one reply method per kind of answer.
import { addon, type RequestHandle } from './addon.js';
import { fitDirentsPlus, packDirents, packDirentsPlus } from './dirents.js';
import { openBits, putAttr, toNameBuffer } from './encode.js';
import type { Attr, Dirent, DirentPlus, EntryParam, OpenParam, Statfs } from './types.js';

/**
 * One FUSE request. Answer exactly once through one reply method; a second answer throws. A request
 * garbage-collected without an answer is answered EIO by the binding's finalizer. Plain fields only: the
 * same hidden class for every request keeps dispatch cheap.
 */
export class Req {
  /** caller's credentials and thread id (fuse_req_ctx) */
  readonly uid: number;
  readonly gid: number;
  readonly pid: number;
  /** readdir/readdirplus only: the byte budget replyDirents packs into */
  readonly size: number;
  #h: RequestHandle | null;
  /** the mount's scratch area, through which attributes and statfs replies cross */
  readonly #scratch: Float64Array;
  /** write: the payload, handed back to the binding with the reply (its receive buffer is reused) */
  #data: Buffer | null;

  /** Made by the mount's dispatcher (src/fuse.ts), never by handlers. */
  constructor(
    scratch: Float64Array,
    h: RequestHandle,
    uid: number,
    gid: number,
    pid: number,
    size: number,
    data: Buffer | null,
  ) {
    this.#scratch = scratch;
    this.#h = h;
    this.uid = uid;
    this.gid = gid;
    this.pid = pid;
    this.size = size;
    this.#data = data;
  }

  get replied(): boolean {
    return this.#h === null || addon.ll_replied(this.#h);
  }

  /**
   * rename only, before the handler changes anything: the node that moves and the one its new name
   * replaces (0: none), neither a directory, or `moved` 0 when in doubt. True: the binding ends only
   * their fast paths' state, now and at the reply (native/fast-rename.c); false: everything ends.
   */
  settleRename(moved: number, replaced: number): boolean {
    return this.#h !== null && addon.ll_frename_settle(this.#h, moved, replaced);
  }

  /** errno 0 = success without data (unlink, rmdir, rename, setxattr, flush, release, ...) */
  replyErr(errno: number): void {
    const h = this.#handle();
    addon.ll_reply_err(h, errno);
    this.#h = null;
  }

  replyEntry(e: EntryParam): void {
    const h = this.#handle();
    if (e.ino) putAttr(this.#scratch, e.attr);
    addon.ll_reply_entry(h, e.ino, e.generation || 0, e.entryTimeout || 0, e.attrTimeout || 0);
    this.#h = null;
  }

  replyCreate(e: EntryParam, o: OpenParam): void {
    const h = this.#handle();
    putAttr(this.#scratch, e.attr);
    const [entryTimeout, attrTimeout] = [e.entryTimeout || 0, e.attrTimeout || 0];
    addon.ll_reply_create(h, e.ino, e.generation || 0, entryTimeout, attrTimeout, o.fh || 0, openBits(o));
    this.#h = null;
  }

  replyAttr(attr: Attr, attrTimeout: number): void {
    const h = this.#handle();
    putAttr(this.#scratch, attr);
    addon.ll_reply_attr(h, attrTimeout || 0);
    this.#h = null;
  }

  replyReadlink(target: Buffer | string): void {
    addon.ll_reply_readlink(this.#handle(), toNameBuffer(target));
    this.#h = null;
  }

  replyOpen(o: OpenParam): void {
    addon.ll_reply_open(this.#handle(), o.fh || 0, openBits(o));
    this.#h = null;
  }

  /** read / getxattr / listxattr data; at most the requested size */
  replyBuf(data: Uint8Array | undefined): void {
    addon.ll_reply_buf(this.#handle(), data);
    this.#h = null;
  }

  /**
   * write: the byte count. The request's payload Buffer (from 64 KiB on, it lies in the binding's receive
   * buffer) is detached by this call, its length becomes 0, and the memory receives the next big WRITE:
   * do not keep the payload past the reply (copy it first).
   */
  replyWrite(count: number): void {
    const data = this.#data;
    this.#data = null;
    addon.ll_reply_write(this.#handle(), count, data);
    this.#h = null;
  }

  replyStatfs(s: Statfs): void {
    const h = this.#handle();
    const d = this.#scratch;
    d[0] = s.bsize || 4096;
    d[1] = s.frsize || s.bsize || 4096;
    d[2] = s.blocks || 0;
    d[3] = s.bfree || 0;
    d[4] = s.bavail || 0;
    d[5] = s.files || 0;
    d[6] = s.ffree || 0;
    d[7] = s.favail === undefined ? s.ffree || 0 : s.favail;
    d[8] = s.fsid || 0;
    d[9] = s.flag || 0;
    d[10] = s.namemax || 255;
    addon.ll_reply_statfs(h);
    this.#h = null;
  }

  /** getxattr/listxattr with size 0: the size of the value / list */
  replyXattr(size: number): void {
    addon.ll_reply_xattr(this.#handle(), size);
    this.#h = null;
  }

  /** readdir: packs as many entries as fit in req.size and replies; returns how many fit */
  replyDirents(entries: readonly Dirent[]): number {
    const h = this.#handle();
    const { buf, count } = packDirents(entries, this.size);
    addon.ll_reply_buf(h, buf);
    this.#h = null;
    return count;
  }

  /** readdirplus: how many of these names fit in req.size (resolve attributes only for those) */
  fitDirentsPlus(names: readonly (string | Buffer)[]): number {
    return fitDirentsPlus(names, this.size);
  }

  /**
   * readdirplus: packs struct fuse_direntplus records into req.size and replies; returns how many fit.
   * Every entry sent with `entry.ino` != 0 counts as one LOOKUP (the kernel will FORGET it).
   */
  replyDirentsPlus(entries: readonly DirentPlus[]): number {
    const h = this.#handle();
    const { buf, count } = packDirentsPlus(entries, this.size, this.#scratch);
    addon.ll_reply_buf(h, buf);
    this.#h = null;
    return count;
  }

  /**
   * The handle, while unanswered. Each reply clears it only once the binding took the reply: a reply the
   * binding refuses (a bad argument throws) leaves the request to be answered.
   */
  #handle(): RequestHandle {
    const h = this.#h;
    if (h === null) throw new Error('this FUSE request was already answered');
    return h;
  }
}
