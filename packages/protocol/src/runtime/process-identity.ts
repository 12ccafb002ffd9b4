// A process identity that survives pid reuse: the pid plus the kernel's start time of that pid
// (field 22 of /proc/<pid>/stat, in clock ticks since boot). Used to tell whether the control plane that
// owns a sandbox, or a recorded worker, is still the same live process.
import { readFileSync } from 'node:fs';

/** The start time of `pid` as recorded by the kernel, or undefined when no such process exists. */
export function processStartTime(pid: number): string | undefined {
  if (!Number.isSafeInteger(pid) || pid <= 0) return undefined;
  let text: string;
  try {
    // Synchronous on purpose: /proc reads do not block on disk, and callers use it inside DB transactions.
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may itself contain spaces or ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); field 22 is rest[19].
  const state = rest[0];
  if (state === 'Z' || state === 'X') return undefined; // a zombie is gone for our purposes
  return rest[19];
}

/** True when `pid` is alive and is the process that had `startTime`. */
export function isSameProcess(pid: number | null, startTime: string | null): boolean {
  if (pid === null || startTime === null) return false;
  return processStartTime(pid) === startTime;
}

/** This process's identity. */
export function selfIdentity(): { pid: number; start: string } {
  return { pid: process.pid, start: processStartTime(process.pid) ?? 'unknown' };
}
