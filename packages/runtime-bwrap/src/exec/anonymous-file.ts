// Inputs bwrap reads to EOF from a file descriptor (`--args FD`, `--seccomp FD`), handed over as anonymous
// in-memory files instead of pipes. A pipe per input costs a socketpair, a stream object and its end/close
// events in the control plane for every command (~0.2 ms of CPU measured per command for the two), and
// the seccomp program is the same for every command: it is written once per process into an anonymous
// file, and each command gets its own open file description of it (its own offset at 0), which is one
// open(2) and one close(2).
//
// Node has no memfd_create; O_TMPFILE on a tmpfs is the same thing: a file with no name, reachable only
// through our own descriptors (and /proc/<our pid>/fd, root only), gone when the last one closes. Files
// are opened close-on-exec (libuv does that), so only the bwrap they are handed to inherits them. Where
// O_TMPFILE is unavailable (old kernels, filesystems without it), callers fall back to pipes.
import { closeSync, constants, openSync, writeSync } from 'node:fs';

/** Linux's O_TMPFILE (__O_TMPFILE | O_DIRECTORY); __O_TMPFILE is 020000000 on x86, arm and arm64. */
const O_TMPFILE = 0o20000000 | constants.O_DIRECTORY;
/** Where anonymous files live: tmpfs, so their contents never reach a disk. */
const ANONYMOUS_DIR = '/dev/shm';

let unsupported = false;

/** A new anonymous file holding `data`, opened read-write; null where O_TMPFILE does not work here. */
function createAnonymous(data: Uint8Array): number | null {
  if (unsupported) return null;
  let fd: number;
  try {
    fd = openSync(ANONYMOUS_DIR, constants.O_RDWR | O_TMPFILE, 0o600);
  } catch {
    // Remembered: every later call falls back at once.
    unsupported = true;
    return null;
  }
  try {
    let written = 0;
    while (written < data.length) written += writeSync(fd, data, written, data.length - written, written);
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/**
 * A read-only descriptor of its own (offset 0) on the anonymous file `fd`: bwrap (and whatever it might
 * leave the descriptor to) can read the input, never change it.
 */
function reader(fd: number): number {
  return openSync(`/proc/self/fd/${fd}`, 'r');
}

/**
 * A read-only descriptor on a new anonymous file holding `data` (a command's bwrap options); null where
 * anonymous files are unavailable. The caller closes it; the file goes with it.
 */
export function openAnonymous(data: Uint8Array): number | null {
  const fd = createAnonymous(data);
  if (fd === null) return null;
  try {
    return reader(fd);
  } finally {
    closeSync(fd);
  }
}

/** One anonymous file per distinct content, kept for the life of the process (the seccomp program). */
const shared = new Map<string, number>();
const sharedByBuffer = new WeakMap<Uint8Array, number>();

/**
 * A descriptor of its own (offset 0, read-only) on the process-wide anonymous file holding `data`; null
 * where anonymous files are unavailable. The caller closes it.
 */
export function openShared(data: Uint8Array): number | null {
  let fd = sharedByBuffer.get(data);
  if (fd === undefined) {
    const key = Buffer.from(data).toString('base64');
    fd = shared.get(key);
    if (fd === undefined) {
      const created = createAnonymous(data);
      if (created === null) return null;
      fd = created;
      shared.set(key, fd);
    }
    sharedByBuffer.set(data, fd);
  }
  // A fresh open file description: concurrent readers never share an offset.
  return reader(fd);
}
