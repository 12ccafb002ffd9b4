// File descriptors this process inherited without close-on-exec would be inherited again by every child
// — bwrap passes them on, so a sandboxed command could hold a pipe or socket of whatever started the CLI.
// Node opens every fd of its own with O_CLOEXEC, so at start-up the ones without it are exactly the
// leaked ones. The `agentfense` executable closes them first thing; a library user's process is its own.
import { closeSync, readFileSync, readdirSync } from 'node:fs';

const O_CLOEXEC = 0o2000000;

/** Closes inherited fds >= 3 that lack close-on-exec; returns the closed fd numbers. */
export function closeInheritedFds(): number[] {
  const closed: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc/self/fdinfo');
  } catch {
    return closed; // no procfs: nothing we can inspect
  }
  for (const entry of entries) {
    const fd = Number(entry);
    if (!Number.isInteger(fd) || fd < 3) continue;
    let info: string;
    try {
      info = readFileSync(`/proc/self/fdinfo/${entry}`, 'utf8');
    } catch {
      continue; // the fd of the directory listing itself, already closed
    }
    const flags = /^flags:\s+([0-7]+)/m.exec(info)?.[1];
    if (flags === undefined || (parseInt(flags, 8) & O_CLOEXEC) !== 0) continue;
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {
      // already gone
    }
  }
  return closed;
}
