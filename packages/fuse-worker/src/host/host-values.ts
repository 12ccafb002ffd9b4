// Small host-side values shared by HostDir and its users: which errors mean "absent", and utimensat times.
import { hostIo } from '@agentfense/fuse-native';

/** True for the errors that mean "no such entry here": ENOENT, and ENOTDIR/ELOOP from a non-directory or
 * symlink in the path (which the merged view treats as absent, never as something to follow). */
export function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP';
}

/** A time to set: nanoseconds since the epoch, 'now', or undefined (left unchanged). */
export type TimeSpec = bigint | 'now' | undefined;

const NS_PER_S = 1_000_000_000n;

/** (seconds, nanoseconds) for utimensat: floored, so times before 1970 keep 0 <= nsec < 1e9. */
export function timespec(time: TimeSpec): [bigint | number, number] {
  if (time === undefined) return [0, hostIo.UTIME_OMIT];
  if (time === 'now') return [0, hostIo.UTIME_NOW];
  let sec = time / NS_PER_S;
  let nsec = time - sec * NS_PER_S;
  if (nsec < 0n) {
    sec -= 1n;
    nsec += NS_PER_S;
  }
  return [sec, Number(nsec)];
}

/** The ENOENT error a syscall on `rel` would have thrown (for answers given without one). */
export function missing(rel: string): NodeJS.ErrnoException {
  // Without a stack: answered for every name created below a new directory, where a stack trace was a
  // measurable share of the worker's time; nobody reads it (callers test the code).
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  const err = new Error(`ENOENT: no such file or directory, ${rel}`);
  Error.stackTraceLimit = limit;
  return Object.assign(err, {
    code: 'ENOENT',
    errno: -2,
    path: rel,
  });
}
