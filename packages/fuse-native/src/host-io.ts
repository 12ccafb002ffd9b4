// Host syscalls Node lacks or rounds (native/host-io.c), synchronous, with exact 64-bit offsets and full
// timespecs. Errors carry `code`, `errno` and `syscall` like Node's own.
import { constants } from 'node:os';
import { addon, type RawHostIo } from './addon.js';
import type { Offset } from './types.js';

export interface HostIo {
  pwrite(fd: number, data: Uint8Array, position: Offset): number;
  pread(fd: number, buffer: Uint8Array, position: Offset): number;
  ftruncate(fd: number, length: Offset): void;
  fallocate(fd: number, mode: number, offset: Offset, length: Offset): void;
  /** utimensat(AT_FDCWD, path, ..., AT_SYMLINK_NOFOLLOW); nsec may be UTIME_NOW or UTIME_OMIT */
  lutimens(path: string, atimeSec: Offset, atimeNsec: number, mtimeSec: Offset, mtimeNsec: number): void;
  futimens(fd: number, atimeSec: Offset, atimeNsec: number, mtimeSec: Offset, mtimeNsec: number): void;
  /** mknod(2): mode includes the type bits */
  mknod(path: string, mode: number, rdev: Offset): void;
  /** malloc_trim(0): the heap's free pages back to the kernel, also those below its top; true if any were */
  mallocTrim(): boolean;
  /** null when the attribute is absent */
  lgetxattr(path: string, name: string): Buffer | null;
  lsetxattr(path: string, name: string, value: Uint8Array): void;
  readonly UTIME_NOW: number;
  readonly UTIME_OMIT: number;
}

const ERRNO = constants.errno as Readonly<Record<string, number>>;

/** The addon's function `name`, its errors completed with errno and syscall (from "syscall: message"). */
function hostCall<K extends keyof RawHostIo>(name: K): RawHostIo[K] {
  const fn = addon.host_io[name] as (...args: unknown[]) => unknown;
  return ((...args: unknown[]): unknown => {
    try {
      return fn(...args);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e && typeof e.code === 'string' && ERRNO[e.code] !== undefined) {
        e.errno = -(ERRNO[e.code] as number);
        e.syscall = String(e.message).split(':')[0];
      }
      throw err;
    }
  }) as RawHostIo[K];
}

/** They throw Errors like Node's; a number that is not a safe integer throws RangeError. */
export const hostIo: HostIo = Object.freeze({
  pwrite: hostCall('pwrite'),
  pread: hostCall('pread'),
  ftruncate: hostCall('ftruncate'),
  fallocate: hostCall('fallocate'),
  lutimens: hostCall('lutimens'),
  futimens: hostCall('futimens'),
  mknod: hostCall('mknod'),
  mallocTrim: hostCall('mallocTrim'),
  lgetxattr: hostCall('lgetxattr'),
  lsetxattr: hostCall('lsetxattr'),
  UTIME_NOW: addon.host_io.UTIME_NOW,
  UTIME_OMIT: addon.host_io.UTIME_OMIT,
});
