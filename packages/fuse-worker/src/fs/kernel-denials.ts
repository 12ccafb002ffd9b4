// Denials the kernel makes by itself, from the mode bits we publish (default_permissions, no OPEN round
// trip): opening a `view` file, writing or truncating a `read` file. No request of their own reaches the
// worker, but one GETATTR does: before the kernel fails a permission check it re-validates the inode's
// attributes (fuse_permission: a stale inode is refreshed first; a fresh one is refreshed after
// generic_permission() said EACCES). While that GETATTR is served the caller is blocked inside its
// syscall, and /proc/<pid>/syscall names the syscall and its arguments. So GETATTR of a file the rules do
// not let the sandbox write is where the worker learns what the caller was asking for, and audits it
// when the rules refuse it. Files only: creates and removes refused in a directory are audited by
// dir-denials.ts, which must also tell a re-ask from a walk through the directory.
import { syscallLine } from './caller-syscall.js';

/** What a caller blocked in a syscall was asking of the file being re-validated. */
export interface PendingAccess {
  /** The audit op: 'open' or 'truncate'. */
  readonly op: 'open' | 'truncate';
  readonly access: 'read' | 'write';
}

// x86-64 syscall numbers (the only architecture this project builds for; others answer null).
const SYS_OPEN = 2;
const SYS_TRUNCATE = 76;
const SYS_CREAT = 85;
const SYS_OPENAT = 257;
const O_ACCMODE = 0o3;
const O_TRUNC = 0o1000;
// O_PATH opens check no permission on the file itself: nothing to deny.
const O_PATH = 0o10000000;

/**
 * The access the (blocked) thread `pid` is asking for, or null when it is not an open/truncate, is not
 * blocked, or cannot be read. Synchronous on purpose: it must be read before we reply, while the caller
 * is still inside the syscall. Costs one pread of a proc file (caller-syscall.ts keeps it open).
 */
export function pendingAccess(pid: number): PendingAccess | null {
  const line = syscallLine(pid);
  return line === null ? null : classify(line);
}

/** Parses a /proc/<pid>/syscall line: "nr arg1 … arg6 sp pc" (hex args), "running" or "-1 sp pc". */
export function classify(line: string): PendingAccess | null {
  const fields = line.trim().split(' ');
  const nr = Number(fields[0]);
  const arg = (i: number): number => {
    const text = fields[i + 1];
    // Flags live in the low 32 bits; the upper half of a register may hold garbage.
    return text === undefined || !/^0x[0-9a-f]+$/i.test(text) ? NaN : Number(BigInt(text) & 0xffffffffn);
  };
  switch (nr) {
    case SYS_OPEN:
      return fromOpenFlags(arg(1));
    case SYS_OPENAT:
      return fromOpenFlags(arg(2));
    case SYS_CREAT:
      return { op: 'open', access: 'write' };
    case SYS_TRUNCATE:
      return { op: 'truncate', access: 'write' };
    default:
      return null;
  }
}

function fromOpenFlags(flags: number): PendingAccess | null {
  if (Number.isNaN(flags) || (flags & O_PATH) !== 0) return null;
  const writes = (flags & O_ACCMODE) !== 0 || (flags & O_TRUNC) !== 0;
  return { op: 'open', access: writes ? 'write' : 'read' };
}
