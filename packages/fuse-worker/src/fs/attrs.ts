// Attributes the kernel sees. With `default_permissions` the kernel enforces mode bits for the sandbox user
// (who owns every file and has no capabilities), so the mode bits we report ARE the read/write policy on
// the warm path where no request reaches us: view => no rwx bits, read => no w bits, write => as on disk.
import type { BigIntStats } from 'node:fs';
import { constants } from 'node:fs';
import type { Permission } from '@agentfense/protocol';

/** The attribute record the FUSE binding replies with. */
export interface FuseAttr {
  readonly ino: number;
  readonly mode: number;
  readonly nlink: number;
  readonly uid: number;
  readonly gid: number;
  readonly rdev: number;
  /** Exact: a bigint above 2^53 - 1. */
  readonly size: number | bigint;
  readonly blocks: number;
  readonly blksize: number;
  /** Nanoseconds since the epoch; the binding sends them to the kernel as exact timespecs. */
  readonly atimeNs: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
}

const S_IFMT = constants.S_IFMT;
const S_IFDIR = constants.S_IFDIR;
const S_IFLNK = constants.S_IFLNK;

/** Mode bits for an entry under a permission (`traversable` = a `none` directory holding exceptions). */
export function modeFor(rawMode: number, permission: Permission): number {
  const type = rawMode & S_IFMT;
  // All 12 bits, set-id included: they are stored exactly (the mount is nosuid, and commit strips them).
  const perms = rawMode & 0o7777;
  if (type === S_IFLNK) return type | 0o777; // the kernel ignores symlink modes; readlink is checked by us
  if (type === S_IFDIR) {
    // Directories below write can still be listed and entered (view lists names, contract §2).
    return permission === 'write' ? type | perms : type | (perms & ~0o222) | 0o555;
  }
  switch (permission) {
    case 'write':
      return type | perms;
    case 'read':
      return type | (perms & ~0o222);
    default:
      return type; // view: no rwx — open() fails with EACCES in the kernel, reads never reach us
  }
}

/** Inode number the sandbox sees: the codebase identity when there is one, so copy-up keeps it stable. */
export function stableIno(
  lower: { ino: bigint } | null,
  upper: { ino: bigint } | null,
  fallback: number,
): number {
  const ino = lower?.ino ?? upper?.ino;
  // JS numbers are exact to 2^53; fold larger inode numbers rather than lose them to rounding.
  return ino === undefined ? fallback : Number(ino & 0x1f_ffff_ffff_ffffn) || fallback;
}

export interface AttrOptions {
  readonly ino: number;
  readonly permission: Permission;
  /** Owner the sandbox sees (the mounting uid maps to the sandbox user inside bwrap). */
  readonly uid: number;
  readonly gid: number;
}

/**
 * What every directory reports as its size and blocks: the host's count the bytes of every entry,
 * hidden ones included (an ext4 directory of hidden files is 12288 bytes, an empty one 4096).
 */
const DIR_SIZE = 4096;
const DIR_BLOCKS = 8;

/** Converts an lstat result into the kernel's view of the entry. */
export function toAttr(stat: BigIntStats, options: AttrOptions): FuseAttr {
  const isDir = (Number(stat.mode) & S_IFMT) === S_IFDIR;
  return {
    ino: options.ino,
    mode: modeFor(Number(stat.mode), options.permission),
    nlink: Number(stat.nlink),
    uid: options.uid,
    gid: options.gid,
    rdev: Number(stat.rdev),
    size: isDir ? DIR_SIZE : exactSize(stat.size),
    blocks: isDir ? DIR_BLOCKS : Number(stat.blocks),
    blksize: Number(stat.blksize),
    atimeNs: stat.atimeNs,
    mtimeNs: stat.mtimeNs,
    ctimeNs: stat.ctimeNs,
  };
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A size as a number while that is exact, else the bigint itself (never rounded). */
export function exactSize(size: bigint): number | bigint {
  return size <= MAX_SAFE ? Number(size) : size;
}
