// The data path: READ, WRITE, FALLOCATE, FSYNC on one host handle per node (no OPEN reaches us, see the
// README). The permission is checked on every request that reaches the worker (host root skips the mode
// bits); the first write-side request copies the file up into the delta.
import { constants, fchmodSync, fstatSync, readSync, writeSync } from 'node:fs';
import type { BigIntStats } from 'node:fs';
import { hostIo } from '@agentfense/fuse-native';
import { atLeast } from '@agentfense/protocol';
import type { Permission } from '@agentfense/protocol';
import { writeWithin } from '../delta/quota.js';
import { FsError } from '../errors.js';
import type { HostFile, WritableFile } from '../host/raw-file.js';
import type { FsCore } from './core.js';
import { allow, deny } from './decisions.js';
import { registerIfReadable } from './native-reads.js';
import type { Caller, Offset } from './types.js';

const FALLOC_FL_KEEP_SIZE = 0x01;
/** Mode bits of should_remove_suid (not all in node:fs constants' types). */
const S_ISUID = 0o4000;
const S_ISGID = 0o2000;
const S_IXGRP = 0o0010;
/** READs up to this size are served with a synchronous pread (small files, single pages). */
const SYNC_READ_MAX = 32 * 1024;
/**
 * Size of the pooled buffers for bigger READs (the kernel's readahead: 128 KiB) and how many to keep. A READ
 * above it (up to 1 MiB with max_pages, from a large read(2)) gets a buffer of its own.
 */
const BIG_READ_BYTES = 128 * 1024;
const BIG_READ_POOL = 8;

/** The data ops of one PolicyFs, with the read buffers they reuse. */
export class DataPath {
  readonly #fs: FsCore;
  /** Scratch space of readReply's synchronous small reads. */
  #readBuffer = Buffer.allocUnsafeSlow(SYNC_READ_MAX);
  /** Reusable buffers of readReply's asynchronous big reads (one per read in flight). */
  readonly #bigReadBuffers: Buffer[] = [];

  constructor(fs: FsCore) {
    this.#fs = fs;
  }

  /**
   * What a READ tells the predictor, the kernel-cache bookkeeping and the read-ahead (also for READs the
   * binding answered, native-reads.ts).
   */
  noteRead(ino: number, offset: Offset): void {
    const fs = this.#fs;
    fs.predictor.noteRead(ino);
    // the kernel marks the file's atime stale at every READ
    fs.cache.entries.attrsStale(ino);
    const node = fs.inodes.get(ino);
    fs.cache.noteRead(node);
    if (fs.readAheadOnRead && offset === 0 && node !== undefined && node.parent !== 0) {
      fs.listingPredictor.noteRead(node.parent);
      fs.readAhead.onLookup(node.parent, node.name);
    }
  }

  /** READ: needs read; served from a per-node host handle. */
  async read(ino: number, size: number, offset: Offset, caller: Caller): Promise<Buffer> {
    this.noteRead(ino, offset);
    // Synchronous pread (see #withFd): from the page cache it takes a few µs, an async one 40+ µs.
    return this.#withFd(ino, false, caller, 'read', (fd) => {
      const buffer = Buffer.allocUnsafe(size);
      const bytesRead = readSync(fd, buffer, 0, size, offset);
      return bytesRead === size ? buffer : buffer.subarray(0, bytesRead);
    });
  }

  /**
   * READ answered through `reply` straight from reusable buffers: no allocation per request (a cold
   * 1 GiB read is 8192 READs of 128 KiB). `reply` must send synchronously (the binding's replyBuf writes
   * to /dev/fuse before returning), because the buffer is reused right after it returns.
   */
  async readReply(
    ino: number,
    size: number,
    offset: Offset,
    caller: Caller,
    reply: (data: Uint8Array) => void,
  ): Promise<void> {
    this.noteRead(ino, offset);
    if (size > SYNC_READ_MAX) {
      // Big reads are the kernel's readahead of a large file, several in flight at once: done in the
      // thread pool they overlap with each other and with the disk; done synchronously they queue up on
      // the JS thread (a cold 1 GiB `dd` measured 5.6x native that way, ~1-1.5x like this).
      const handle = await this.#handle(ino, false, caller, 'read');
      // A pooled buffer only for a READ it can hold: a bigger one (a read(2) over 128 KiB, up to 1 MiB with
      // max_pages) into a pooled 128 KiB buffer would fail with RangeError, i.e. EIO to the reader.
      const at = this.#bigReadBuffers.findIndex((b) => b.length >= size);
      const buffer =
        at === -1
          ? Buffer.allocUnsafeSlow(Math.max(size, BIG_READ_BYTES))
          : this.#bigReadBuffers.splice(at, 1)[0]!;
      try {
        const { bytesRead } = await handle.read(buffer, 0, size, offset);
        reply(buffer.subarray(0, bytesRead));
        // Registered only while this handle is still the node's (its fd not closed across the await).
        if (handle.fd !== -1 && this.#fs.handles.get(ino, false) === handle)
          registerIfReadable(this.#fs, ino, handle.fd);
      } finally {
        if (this.#bigReadBuffers.length < BIG_READ_POOL) {
          this.#bigReadBuffers.push(buffer);
        }
      }
      return;
    }
    await this.#withFd(ino, false, caller, 'read', (fd) => {
      const buffer = this.#readBuffer;
      reply(buffer.subarray(0, readSync(fd, buffer, 0, size, offset)));
      registerIfReadable(this.#fs, ino, fd);
    });
  }

  /**
   * WRITE: needs write; the first write copies the file up into the delta. An offset above 2^53 - 1
   * arrives as a bigint and goes to pwrite(2) exactly (hostIo): Node's writeSync would take it as "the
   * current position" and write elsewhere. The host filesystem answers EFBIG past its own limit.
   */
  async write(ino: number, data: Buffer, offset: Offset, caller: Caller): Promise<number> {
    // the kernel drops the file's size and mtime after a WRITE
    this.#fs.cache.entries.attrsStale(ino);
    const quota = this.#fs.delta.quota;
    if (quota !== null && !quota.ready) await quota.whenReady();
    return this.#withFd(ino, true, caller, 'write', (fd) => this.#put(ino, fd, data, offset, caller));
  }

  /**
   * WRITE without a promise when the file's host handle is open and the quota counted: the same checks,
   * charge and write as `write`, in one synchronous step. Undefined when it would need an await (then
   * `write` serves it); a refusal throws as there. Most WRITEs (every one after a file's CREATE) take it.
   */
  writeIfOpen(ino: number, data: Buffer, offset: Offset, caller: Caller): number | undefined {
    const quota = this.#fs.delta.quota;
    if (quota !== null && !quota.ready) return undefined;
    const fd = this.#checkedCached(ino, true, caller, 'write')?.fd;
    if (fd === undefined || fd === -1) return undefined;
    this.#fs.cache.entries.attrsStale(ino);
    return this.#put(ino, fd, data, offset, caller);
  }

  /** The write itself on `fd`: charged to the quota, set-id bits cleared as Linux would (see `write`). */
  #put(ino: number, fd: number, data: Buffer, offset: Offset, caller: Caller): number {
    // A file created write-only is written with direct I/O (namespace-ops.ts create), and on those
    // writes the kernel leaves clearing set-id bits to us. It clears them for a writer without
    // CAP_FSETID in the host's namespace: every sandbox process (never host root), not host root.
    const killSetId = caller.uid !== 0 && this.#fs.directWriters.has(ino);
    const put = (before?: BigIntStats): number => {
      if (killSetId) clearSetId(fd, before === undefined ? fstatSync(fd).mode : Number(before.mode));
      return typeof offset === 'bigint'
        ? hostIo.pwrite(fd, data, offset)
        : writeSync(fd, data, 0, data.length, offset);
    };
    const quota = this.#fs.delta.quota;
    // Number(offset) only rounds above 2^53, far beyond any quota: such a write is refused either way.
    const written =
      quota === null
        ? put()
        : writeWithin(quota, fd, { offset: Number(offset), length: data.length }, `write #${ino}`, put);
    // Decided and counted: the node's next WRITEs may be answered by the binding (native-writes.ts).
    this.#fs.nativeWrites?.served(ino, fd, this.#fs.directWriters.has(ino));
    // ... and its READs (native-reads.ts): a file just written is often read back (tar, then grep).
    registerIfReadable(this.#fs, ino, fd);
    return written;
  }

  /**
   * FALLOCATE: needs write (the first one copies the file up). Mode 0 (allocate, may extend the file)
   * and KEEP_SIZE (allocate past the end without changing the size); anything else (punch hole,
   * collapse/zero/insert range) is EOPNOTSUPP, which tools treat as "not on this filesystem". Within
   * the disk quota: a range ending past it is ENOSPC at once, before any block is allocated (without
   * this op glibc's posix_fallocate wrote 1 TiB of zeros for 300 s).
   */
  async fallocate(ino: number, mode: number, offset: Offset, length: Offset, caller: Caller): Promise<void> {
    if (mode !== 0 && mode !== FALLOC_FL_KEEP_SIZE) {
      throw new FsError('EOPNOTSUPP', `fallocate mode ${mode} is not supported (only 0 and KEEP_SIZE)`);
    }
    const end = BigInt(offset) + BigInt(length);
    this.#fs.cache.entries.attrsStale(ino);
    const quota = this.#fs.delta.quota;
    if (quota !== null && !quota.ready) await quota.whenReady();
    await this.#withFd(ino, true, caller, 'write', (fd) => {
      if (quota === null) {
        hostIo.fallocate(fd, mode, offset, length);
        return;
      }
      // Clamped: a range past 2^53 is refused by the quota either way.
      const at = Number(offset);
      const bytes = end > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER - at : Number(length);
      writeWithin(quota, fd, { offset: at, length: bytes }, `fallocate #${ino}`, () => {
        hostIo.fallocate(fd, mode, offset, length);
        return 0;
      });
    });
  }

  /** FSYNC: flushes the host file if we hold one. */
  async fsync(ino: number, datasync: boolean): Promise<void> {
    const handle = this.#fs.handles.get(ino, false);
    if (handle === undefined) return;
    await (datasync ? handle.datasync() : handle.sync());
  }

  /** The host handle for a data op, after the permission check; opening for write copies up. */
  async #handle(ino: number, needWrite: boolean, caller: Caller, op: 'read' | 'write'): Promise<HostFile> {
    const cached = this.#checkedCached(ino, needWrite, caller, op);
    if (cached !== undefined) return cached;
    const fs = this.#fs;
    // not null: #checkedCached throws for a removed node without a handle
    const path = fs.inodes.pathOf(ino)!;
    const permission = fs.rules.permissionOf(path);
    let handle: HostFile;
    if (needWrite) {
      // A checkpoint that began meanwhile may have frozen the file this fd names: open the path again.
      let writable: WritableFile;
      for (;;) {
        const epoch = fs.delta.layerEpoch;
        writable = await fs.delta.openForWrite(path, constants.O_RDWR);
        if (epoch === fs.delta.layerEpoch) break;
        await writable.close();
      }
      fs.handles.set(ino, writable, true);
      handle = writable;
    } else {
      handle = await fs.delta.openReadHandle(path);
      fs.handles.set(ino, handle, false);
    }
    allow(fs, op, path, permission, caller);
    return handle;
  }

  /**
   * The permission check of a data op (a refusal throws), then the node's cached host handle, or
   * undefined when none is cached and the path must be opened.
   */
  #checkedCached(
    ino: number,
    needWrite: boolean,
    caller: Caller,
    op: 'read' | 'write',
  ): HostFile | undefined {
    const fs = this.#fs;
    const cached = fs.handles.get(ino, needWrite);
    const path = fs.inodes.pathOf(ino);
    if (path === null) {
      // Unlinked but still open in the sandbox: only the handle we kept serves it.
      if (cached === undefined) throw new FsError('ENOENT', `inode ${ino} was removed`);
      return cached;
    }
    const permission = fs.rules.permissionOf(path);
    const needed: Permission = needWrite ? 'write' : 'read';
    if (!atLeast(permission, needed)) {
      throw deny(fs, op, path, permission, permission === 'none' ? 'ENOENT' : 'EACCES', caller);
    }
    return cached;
  }

  /**
   * Runs the synchronous `io` on the host fd of a data op. The fd is read from its handle and used in
   * ONE synchronous step, after the last await: a handle's `fd` turns -1 the moment its close begins
   * (HandleCache.drop; FileHandle and RawFile alike), and the number may be reused by the next open as
   * soon as the thread pool has closed it, so an fd carried across an await could name another file
   * (other requests run in between). If a drop won the race, the handle is looked up again.
   * Data ops run synchronously on purpose: one FUSE request is served at a time from the JS thread
   * anyway, and a thread-pool round trip costs more than a page-cache copy of 128 KiB.
   */
  async #withFd<T>(
    ino: number,
    needWrite: boolean,
    caller: Caller,
    op: 'read' | 'write',
    io: (fd: number) => T,
  ): Promise<T> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const handle = await this.#handle(ino, needWrite, caller, op);
      const fd = handle.fd; // no await from here to the syscall
      if (fd !== -1) return io(fd);
    }
    throw new FsError('EIO', `inode ${ino}: its host file kept being closed during a ${op}`);
  }
}

/**
 * What Linux does to a file on a write by a writer without CAP_FSETID (should_remove_suid): set-uid goes,
 * set-gid goes when the group may execute (without it, set-gid marks mandatory locking and stays). The
 * kernel refreshes the mode from us at the next stat: a direct write invalidates the file's attributes.
 */
function clearSetId(fd: number, mode: number): void {
  let kill = mode & S_ISUID;
  if ((mode & S_ISGID) !== 0 && (mode & S_IXGRP) !== 0) kill |= S_ISGID;
  if (kill !== 0) fchmodSync(fd, mode & 0o7777 & ~kill);
}
