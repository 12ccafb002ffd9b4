// A host file descriptor opened synchronously, with FileHandle's guarantees about its number.
import type { BigIntStats } from 'node:fs';
import { close, fchmod, fchown, fdatasync, fstat, fsync, ftruncate, read, write } from 'node:fs';

/** What the worker's data ops need of an open host file; `FileHandle` satisfies it too. */
export interface HostFile {
  /** The descriptor, or -1 from the moment close() is called. */
  readonly fd: number;
  close(): Promise<void>;
  read(
    buffer: Buffer,
    offset: number,
    length: number,
    position: number | bigint,
  ): Promise<{ bytesRead: number }>;
  stat(options: { bigint: true }): Promise<BigIntStats>;
  sync(): Promise<void>;
  datasync(): Promise<void>;
}

/** An open host file the worker writes through: also what SETATTR of an unlinked file needs of it. */
export interface WritableFile extends HostFile {
  chown(uid: number, gid: number): Promise<void>;
  chmod(mode: number): Promise<void>;
  /** Writes all of `data` at the file's start (a file just created or truncated). */
  writeFile(data: string | Uint8Array): Promise<void>;
  /** ftruncate(2) in the thread pool: shrinking a big file frees its blocks inside the syscall. */
  truncate(length: number): Promise<void>;
}

type Callback<T> = (err: NodeJS.ErrnoException | null, value: T) => void;

/**
 * Wraps a raw fd from `openSync`. Why not a FileHandle: one can only be opened through libuv's thread
 * pool, a round trip that cost 30-40 µs on every cold file a FUSE READ opens (plus its close); a
 * synchronous openat in a cached directory takes a few µs.
 * Same contract as FileHandle where the worker relies on it: `fd` reads -1 as soon as close() is called,
 * and the number itself is released only once the asynchronous operations in flight on it have finished,
 * so it can never be reused by another open() underneath one of them.
 * The close itself runs in the thread pool, as FileHandle's does (closeInPool).
 */
export class RawFile implements WritableFile {
  #fd: number;
  #inFlight = 0;
  #closed: Promise<void> | undefined;
  #whenIdle: (() => void) | undefined;

  constructor(fd: number) {
    this.#fd = fd;
  }

  get fd(): number {
    return this.#fd;
  }

  close(): Promise<void> {
    if (this.#closed !== undefined) return this.#closed;
    const fd = this.#fd;
    this.#fd = -1;
    this.#closed =
      this.#inFlight === 0
        ? closeInPool(fd)
        : new Promise((resolve) => (this.#whenIdle = () => resolve(closeInPool(fd))));
    return this.#closed;
  }

  read(
    buffer: Buffer,
    offset: number,
    length: number,
    position: number | bigint,
  ): Promise<{ bytesRead: number }> {
    return this.#run((fd, done: Callback<{ bytesRead: number }>) =>
      read(fd, buffer, offset, length, position, (err, bytesRead) => done(err, { bytesRead })),
    );
  }

  stat(options: { bigint: true }): Promise<BigIntStats> {
    return this.#run((fd, done: Callback<BigIntStats>) => fstat(fd, options, done));
  }

  chown(uid: number, gid: number): Promise<void> {
    return this.#run((fd, done: Callback<void>) => fchown(fd, uid, gid, (err) => done(err, undefined)));
  }

  chmod(mode: number): Promise<void> {
    return this.#run((fd, done: Callback<void>) => fchmod(fd, mode, (err) => done(err, undefined)));
  }

  async writeFile(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    let done = 0;
    while (done < bytes.length) {
      done += await this.#run((fd, cb: Callback<number>) =>
        write(fd, bytes, done, bytes.length - done, done, (err, written) => cb(err, written)),
      );
    }
  }

  truncate(length: number): Promise<void> {
    return this.#run((fd, done: Callback<void>) => ftruncate(fd, length, (err) => done(err, undefined)));
  }

  sync(): Promise<void> {
    return this.#run((fd, done: Callback<void>) => fsync(fd, (err) => done(err, undefined)));
  }

  datasync(): Promise<void> {
    return this.#run((fd, done: Callback<void>) => fdatasync(fd, (err) => done(err, undefined)));
  }

  #run<T>(op: (fd: number, done: Callback<T>) => void): Promise<T> {
    const fd = this.#fd;
    if (fd === -1) return Promise.reject(closedError());
    this.#inFlight++;
    return new Promise<T>((resolve, reject) => {
      op(fd, (err, value) => {
        if (--this.#inFlight === 0 && this.#whenIdle !== undefined) this.#whenIdle();
        if (err === null) resolve(value);
        else reject(err);
      });
    });
  }
}

/**
 * Closes `fd` in libuv's thread pool, never on the JS thread. Closing the last reference to a file that is
 * no longer linked (removed by the sandbox while the worker held it, or replaced behind the mount) makes
 * the host filesystem free it right there: on ext4, 4 ms for 100 MiB not yet written out and 30 ms once it
 * is, seconds for a file of many GiB. The worker's one JS thread answers every request of the sandbox and
 * must not stall for that. Until the close is done the number stays taken, so nothing can reuse it early.
 */
function closeInPool(fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    close(fd, (err) => {
      if (err === null) resolve();
      else reject(err);
    });
  });
}

function closedError(): NodeJS.ErrnoException {
  return Object.assign(new Error('EBADF: file closed'), { code: 'EBADF', errno: -9 });
}
