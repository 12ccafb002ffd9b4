// What a caller blocked in a namespace syscall (mkdir, unlink, rename, open with O_CREAT, ...) asked for,
// read from outside while the kernel waits for our GETATTR reply: the syscall and its registers from
// /proc/<tid>/syscall, the path strings from /proc/<tid>/mem (the worker runs as root), and relative
// paths resolved against the caller's cwd or dirfd (/proc/<tid>/cwd, /proc/<tid>/fd/N). Only ever
// called for a GETATTR that the kernel sends on a refusal (dir-denials.ts): never on the warm path.
import { closeSync, openSync, readSync, readlinkSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';

/** The audit op of each namespace syscall, as the worker names it when it refuses the same op itself. */
export type NamespaceOp = 'mkdir' | 'mknod' | 'symlink' | 'create' | 'link' | 'unlink' | 'rmdir' | 'rename';

/** A path argument: `dirfd` (AT_FDCWD for the cwd) and the address of its NUL-terminated string. */
export interface PathArg {
  readonly dirfd: number;
  readonly address: number;
}

/** One namespace syscall: for rename the source then the destination, for link the new name only. */
export interface NamespaceCall {
  readonly op: NamespaceOp;
  /** rename: [from, to]; link: [to, from]; every other op: [path]. Only paths[0] and rename's paths[1] are refusable. */
  readonly paths: readonly PathArg[];
  /** open/openat/openat2 with O_CREAT: refused only when the name does not exist. */
  readonly openCreate: boolean;
}

const AT_FDCWD = -100;
const AT_REMOVEDIR = 0x200;
const O_CREAT = 0o100;
const AF_UNIX = 1;

// x86-64 syscall numbers (the only architecture this project builds for; others answer null).
const SYS = {
  open: 2,
  bind: 49,
  rename: 82,
  mkdir: 83,
  rmdir: 84,
  creat: 85,
  link: 86,
  unlink: 87,
  symlink: 88,
  mknod: 133,
  openat: 257,
  mkdirat: 258,
  mknodat: 259,
  unlinkat: 263,
  renameat: 264,
  linkat: 265,
  symlinkat: 266,
  renameat2: 316,
  openat2: 437,
} as const;

const lineBuffer = Buffer.alloc(256);

/**
 * /proc/<tid>/syscall files kept open, oldest first. A walker asks from one thread again and again (a
 * `grep -r` stats each directory it lists, and the kernel re-validates each with a GETATTR we must
 * classify), and a pread of a kept file costs a quarter of an open/read/close. A kept file belongs to its
 * task: once that exits the read fails (ESRCH), even if the number is reused, and the file is reopened.
 */
const kept = new Map<number, number>();
const MAX_KEPT = 16;

/** The raw /proc/<tid>/syscall line, or null when the caller is gone or this kernel hides it. */
export function syscallLine(tid: number): string | null {
  if (process.arch !== 'x64' || !Number.isSafeInteger(tid) || tid <= 0) return null;
  const open = kept.get(tid);
  if (open !== undefined) {
    try {
      return readLine(open);
    } catch {
      kept.delete(tid);
      closeSync(open);
    }
  }
  let fd: number;
  try {
    fd = openSync(`/proc/${tid}/syscall`, 'r');
  } catch {
    return null;
  }
  try {
    const line = readLine(fd);
    kept.set(tid, fd);
    if (kept.size > MAX_KEPT) {
      const [oldest, oldFd] = kept.entries().next().value as [number, number];
      kept.delete(oldest);
      closeSync(oldFd);
    }
    return line;
  } catch {
    closeSync(fd);
    return null;
  }
}

/** Reads the whole line again from offset 0 (a seq_file regenerates it: the caller's state right now). */
function readLine(fd: number): string {
  return lineBuffer.toString('latin1', 0, readSync(fd, lineBuffer, 0, lineBuffer.length, 0));
}

const NAMESPACE_SYSCALLS: ReadonlySet<number> = new Set(Object.values(SYS));

/** Whether a /proc/<tid>/syscall line shows one of the syscalls decodeNamespaceCall knows (no I/O). */
export function isNamespaceSyscall(line: string): boolean {
  const space = line.indexOf(' ');
  return NAMESPACE_SYSCALLS.has(Number(space < 0 ? line : line.slice(0, space)));
}

/** Decodes a namespace syscall from a /proc/<tid>/syscall line ("nr arg1 … arg6 sp pc"); null otherwise. */
export async function decodeNamespaceCall(line: string, tid: number): Promise<NamespaceCall | null> {
  const fields = line.trim().split(' ');
  const nr = Number(fields[0]);
  const raw = (i: number): bigint | null => {
    const text = fields[i + 1];
    return text === undefined || !/^0x[0-9a-f]+$/i.test(text) ? null : BigInt(text);
  };
  // An address fits a JS number (user space ends below 2^47); an int argument is the low 32 bits, signed.
  const addr = (i: number): number => Number(raw(i) ?? 0n);
  const int = (i: number): number => Number(BigInt.asIntN(32, raw(i) ?? 0n));
  const at = (dirfd: number, address: number): PathArg => ({ dirfd, address });
  const cwd = (address: number): PathArg => at(AT_FDCWD, address);
  const one = (op: NamespaceOp, path: PathArg): NamespaceCall => ({ op, paths: [path], openCreate: false });
  const creating = (flags: number, path: PathArg): NamespaceCall | null =>
    (flags & O_CREAT) === 0 ? null : { op: 'create', paths: [path], openCreate: true };
  switch (nr) {
    case SYS.mkdir:
      return one('mkdir', cwd(addr(0)));
    case SYS.mkdirat:
      return one('mkdir', at(int(0), addr(1)));
    case SYS.mknod:
      return one('mknod', cwd(addr(0)));
    case SYS.mknodat:
      return one('mknod', at(int(0), addr(1)));
    case SYS.symlink:
      return one('symlink', cwd(addr(1)));
    case SYS.symlinkat:
      return one('symlink', at(int(1), addr(2)));
    case SYS.unlink:
      return one('unlink', cwd(addr(0)));
    case SYS.rmdir:
      return one('rmdir', cwd(addr(0)));
    case SYS.unlinkat:
      return one((int(2) & AT_REMOVEDIR) === 0 ? 'unlink' : 'rmdir', at(int(0), addr(1)));
    case SYS.creat:
      return { op: 'create', paths: [cwd(addr(0))], openCreate: false };
    case SYS.open:
      return creating(int(1), cwd(addr(0)));
    case SYS.openat:
      return creating(int(2), at(int(0), addr(1)));
    case SYS.openat2:
      // struct open_how starts with the u64 flags
      return creating(
        Number((await readMemory(tid, addr(2), 8))?.readBigUInt64LE(0) ?? 0n),
        at(int(0), addr(1)),
      );
    case SYS.link:
      return { op: 'link', paths: [cwd(addr(1)), cwd(addr(0))], openCreate: false };
    case SYS.linkat:
      return { op: 'link', paths: [at(int(2), addr(3)), at(int(0), addr(1))], openCreate: false };
    case SYS.rename:
      return { op: 'rename', paths: [cwd(addr(0)), cwd(addr(1))], openCreate: false };
    case SYS.renameat:
    case SYS.renameat2:
      return { op: 'rename', paths: [at(int(0), addr(1)), at(int(2), addr(3))], openCreate: false };
    case SYS.bind:
      return bindCall(tid, addr(1), int(2));
    default:
      return null;
  }
}

/** bind(2) of a Unix socket to a path creates it like mknod; abstract and other families create nothing. */
async function bindCall(tid: number, address: number, length: number): Promise<NamespaceCall | null> {
  if (length <= 3) return null;
  const family = await readMemory(tid, address, 3);
  if (family?.length !== 3 || family.readUInt16LE(0) !== AF_UNIX || family[2] === 0) return null;
  return { op: 'mknod', paths: [{ dirfd: AT_FDCWD, address: address + 2 }], openCreate: false };
}

const PAGE = 4096;
const PATH_MAX = 4096;
/** A read of the caller's memory that takes longer is given up (the record is lost, nothing else). */
const MEMORY_TIMEOUT_MS = 2000;

type MemoryRead = (address: number, length: number) => Promise<Buffer | null>;

/**
 * Runs `use` with reads of the caller's memory, in the thread pool and bounded in time. Never
 * synchronously: /proc/<tid>/mem takes the caller's mmap lock, which another of its threads may hold
 * (or queue for) while it waits for a request of ours (a fault on a page of this mount); blocking our
 * only JS thread there would leave that request unserved for good.
 */
async function withMemory<T>(tid: number, use: (read: MemoryRead) => Promise<T | null>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((done) => {
    timer = setTimeout(() => done(null), MEMORY_TIMEOUT_MS);
  });
  const reading = (async (): Promise<T | null> => {
    const handle = await open(`/proc/${tid}/mem`, 'r');
    try {
      return await use(async (address, length) => {
        const out = Buffer.alloc(length);
        let got = 0;
        // Page by page: a read that crosses into an unmapped page fails as a whole.
        while (got < length) {
          const chunk = Math.min(length - got, PAGE - ((address + got) % PAGE));
          const { bytesRead } = await handle
            .read(out, got, chunk, address + got)
            .catch(() => ({ bytesRead: 0 }));
          if (bytesRead <= 0) break;
          got += bytesRead;
        }
        return got === 0 ? null : out.subarray(0, got);
      });
    } finally {
      await handle.close();
    }
  })().catch(() => null);
  try {
    return await Promise.race([reading, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Up to `length` bytes of the caller's memory at `address` (fewer if a page is unmapped), or null. */
export function readMemory(tid: number, address: number, length: number): Promise<Buffer | null> {
  if (!Number.isSafeInteger(address) || address <= 0) return Promise.resolve(null);
  return withMemory(tid, (read) => read(address, length));
}

/** The NUL-terminated path at `address` in the caller, or null if unreadable or longer than PATH_MAX. */
export function readPath(tid: number, address: number): Promise<string | null> {
  if (!Number.isSafeInteger(address) || address <= 0) return Promise.resolve(null);
  return withMemory(tid, async (read) => {
    const parts: Buffer[] = [];
    for (let offset = 0; offset < PATH_MAX;) {
      const chunk = Math.min(PAGE - ((address + offset) % PAGE), PATH_MAX - offset);
      const bytes = await read(address + offset, chunk);
      if (bytes === null) return null;
      const end = bytes.indexOf(0);
      if (end >= 0) return Buffer.concat([...parts, bytes.subarray(0, end)]).toString('utf8');
      parts.push(bytes);
      offset += bytes.length;
    }
    return null;
  });
}

/** The path the caller means by `dirfd` (its cwd for AT_FDCWD), in its own mount namespace; null if unknown. */
export function callerDir(tid: number, dirfd: number): string | null {
  try {
    const link = readlinkSync(dirfd === AT_FDCWD ? `/proc/${tid}/cwd` : `/proc/${tid}/fd/${dirfd}`);
    return link.startsWith('/') && !link.endsWith(' (deleted)') ? link : null;
  } catch {
    return null;
  }
}

/** Where the mount of FUSE connection `minor` shows in the caller's namespace: mount points and their roots. */
export async function callerMounts(
  tid: number,
  minor: number,
): Promise<{ mountpoint: string; root: string }[]> {
  let text: string;
  try {
    text = await readFile(`/proc/${tid}/mountinfo`, 'utf8');
  } catch {
    return [];
  }
  const device = `0:${minor}`;
  const out: { mountpoint: string; root: string }[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    if (fields[2] !== device) continue;
    out.push({ root: unescape(fields[3] ?? ''), mountpoint: unescape(fields[4] ?? '') });
  }
  return out;
}

/** Mountinfo escapes space, tab, newline and backslash as \ooo. */
function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}
