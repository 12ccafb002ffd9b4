// The compiled binding (native/*.c, built by scripts/build.js into dist/fuse.node), loaded once. The
// function names and argument orders are the contract with native/addon.c.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

declare const handleBrand: unique symbol;
/** A request as the binding knows it (a napi external): answered once, through one reply function. */
export type RequestHandle = { readonly [handleBrand]: 'request' };
declare const sessionBrand: unique symbol;
/** One mount's state in the binding (a napi external). */
export type SessionHandle = { readonly [sessionBrand]: 'session' };

/**
 * Called for every queued request, a batch at a time: op number (an index into `ll_ops`), request handle
 * (undefined for forget), caller's uid, gid and pid, then the op's arguments (native/dispatch.c).
 */
export type Dispatch = (
  op: number,
  h: RequestHandle | undefined,
  uid: number,
  gid: number,
  pid: number,
  ...args: unknown[]
) => void;

/** What INIT negotiated, as the binding reports it. */
export interface RawConnInfo {
  protoMajor: number;
  protoMinor: number;
  maxWrite: number;
  maxReadahead: number;
  capable: number;
  want: number;
}

/** The host syscalls of native/host-io.c, as the addon exports them (errors without errno/syscall). */
export interface RawHostIo {
  pwrite(fd: number, data: Uint8Array, position: number | bigint): number;
  pread(fd: number, buffer: Uint8Array, position: number | bigint): number;
  ftruncate(fd: number, length: number | bigint): void;
  fallocate(fd: number, mode: number, offset: number | bigint, length: number | bigint): void;
  lutimens(path: string, aSec: number | bigint, aNsec: number, mSec: number | bigint, mNsec: number): void;
  futimens(fd: number, aSec: number | bigint, aNsec: number, mSec: number | bigint, mNsec: number): void;
  mknod(path: string, mode: number, rdev: number | bigint): void;
  mallocTrim(): boolean;
  lgetxattr(path: string, name: string): Buffer | null;
  lsetxattr(path: string, name: string, value: Uint8Array): void;
  readonly UTIME_NOW: number;
  readonly UTIME_OMIT: number;
}

export interface Addon {
  /** handler names by op number; index 0 is unused */
  readonly ll_ops: readonly string[];
  readonly libfuse_version: string;
  readonly host_io: RawHostIo;
  ll_new(dispatch: Dispatch, scratch: Float64Array, implemented: number): SessionHandle;
  ll_mount(
    s: SessionHandle,
    mountpoint: string,
    args: string[],
    features: number,
    maxWrite: number,
  ): Promise<RawConnInfo>;
  ll_closed(s: SessionHandle): Promise<void>;
  ll_notify(
    s: SessionHandle,
    kind: number,
    ino: number,
    a: number,
    b: number,
    name?: Buffer,
  ): Promise<number>;
  ll_store_epoch(s: SessionHandle, epoch: Int32Array): void;
  ll_store_ahead(
    s: SessionHandle,
    dirFd: number,
    maxBytes: number,
    nodes: Float64Array,
    strings: Buffer,
  ): Promise<Buffer>;
  ll_fast_init(
    s: SessionHandle,
    state: Float64Array,
    onWrites: (nodes: Float64Array, writes: number) => void,
  ): void;
  ll_fast_register(s: SessionHandle, ino: number, fd: number, direct: boolean): number;
  ll_fast_drop(s: SessionHandle, ino: number): number;
  ll_fast_invalidate(s: SessionHandle): void;
  ll_fast_fold(s: SessionHandle): Float64Array;
  ll_fast_read_init(
    s: SessionHandle,
    callerUid: number,
    onReads: (pairs: Float64Array, reads: number) => void,
  ): void;
  ll_fast_read_register(s: SessionHandle, ino: number, fd: number): boolean;
  ll_fast_read_drop(s: SessionHandle, ino: number): boolean;
  ll_fast_read_invalidate(s: SessionHandle): void;
  ll_fentry_init(s: SessionHandle, state: Float64Array, codebaseRootFd: number): void;
  ll_fentry_mark(s: SessionHandle, ino: number, upperRootFd: number, rel: string, stIno: number): boolean;
  ll_fentry_unmark(s: SessionHandle, ino: number): void;
  ll_frename_enable(s: SessionHandle): void;
  ll_frename_settle(h: RequestHandle, moved: number, replaced: number): boolean;
  ll_fcreate_init(
    s: SessionHandle,
    state: Float64Array,
    onCreates: (rows: Float64Array, names: string) => void,
  ): void;
  ll_reply_err(h: RequestHandle, errno: number): void;
  ll_reply_entry(
    h: RequestHandle,
    ino: number,
    generation: number,
    entryTimeout: number,
    attrTimeout: number,
  ): void;
  ll_reply_create(
    h: RequestHandle,
    ino: number,
    generation: number,
    entryTimeout: number,
    attrTimeout: number,
    fh: number,
    openBits: number,
  ): void;
  ll_reply_attr(h: RequestHandle, attrTimeout: number): void;
  ll_reply_readlink(h: RequestHandle, target: Buffer): void;
  ll_reply_open(h: RequestHandle, fh: number, openBits: number): void;
  ll_reply_buf(h: RequestHandle, data: Uint8Array | undefined): void;
  ll_reply_write(h: RequestHandle, count: number, payload: Buffer | null): void;
  ll_reply_statfs(h: RequestHandle): void;
  ll_reply_xattr(h: RequestHandle, size: number): void;
  ll_replied(h: RequestHandle): boolean;
}

// From src/ (tests through the source condition) and dist/ alike, the addon sits in dist/. A bundle that
// takes this module in gives it its original URL (packages/fuse-worker/scripts/bundle.js).
const url = new URL(
  import.meta.url.includes('/dist/') ? './fuse.node' : '../dist/fuse.node',
  import.meta.url,
);

/** Always the addon `pnpm build` compiled from native/, never a prebuilt one. */
export const addon = createRequire(import.meta.url)(fileURLToPath(url)) as Addon;
