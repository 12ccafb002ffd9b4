// File descriptors this process inherited without close-on-exec would be inherited again by every child
// — bwrap passes them on, so a sandboxed command could hold a pipe or socket of whatever started the CLI.
// Node opens every fd of its own with O_CLOEXEC, so at start-up the ones without it are exactly the
// leaked ones. The `agentfense` executable closes them first thing; a library user's process is its own.
import { closeSync } from 'node:fs';
import { descriptorsWithoutCloseOnExec } from '@agentfense/protocol/fds';

/** Closes inherited fds >= 3 that lack close-on-exec; returns the closed fd numbers. */
export function closeInheritedFds(): number[] {
  const closed: number[] = [];
  for (const fd of descriptorsWithoutCloseOnExec()) {
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {
      // already gone
    }
  }
  return closed;
}
