// The `forgotten` marker of a sandbox directory whose record is gone (the one-shot CLI's fast exit,
// cli/forget-one-shot.ts; the run helper's retire, retire.ts): it names its writer by pid and start time.
// The CLI's reapers remove marked directories, but not one whose writer is still alive: that process
// (the run helper, tearing a retired sandbox down after answering) removes it itself, and two removers at
// once race on its mounts, cgroups and files (review7: ENOENT from rmdir in one of them).
import { isSameProcess, selfIdentity } from '@agentfense/protocol';

/** What a marker written by this process holds. */
export function forgottenMarker(): string {
  const { pid, start } = selfIdentity();
  return `${pid} ${start}\n`;
}

/** True when the marker's writer is still running (an older marker, a pid alone, counts as gone). */
export function markerWriterAlive(text: string): boolean {
  const [pid, start] = text.trim().split(' ');
  return start !== undefined && isSameProcess(Number(pid), start);
}
