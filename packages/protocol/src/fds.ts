// Descriptors a process inherited without close-on-exec: every child it spawns would inherit them again,
// and bwrap passes them on into the sandbox. Node opens each descriptor of its own close-on-exec, so at
// any moment the ones without the flag came from outside (the parent that started this process) or from
// native code. Its own entry point (`@agentfense/protocol/fds`): the CLI reads this before loading
// anything else.
import { readFileSync, readdirSync } from 'node:fs';

const O_CLOEXEC = 0o2000000;

/** Open descriptors >= `from` (at least 3) that lack close-on-exec, ascending; [] without /proc. */
export function descriptorsWithoutCloseOnExec(from = 3): number[] {
  const found: number[] = [];
  let names: string[];
  try {
    names = readdirSync('/proc/self/fdinfo');
  } catch {
    return found; // no procfs: nothing can be inspected
  }
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd < Math.max(from, 3)) continue;
    let info: string;
    try {
      info = readFileSync(`/proc/self/fdinfo/${name}`, 'latin1');
    } catch {
      continue; // the descriptor of the listing itself, already closed
    }
    const flags = /^flags:\s*([0-7]+)/m.exec(info)?.[1];
    if (flags !== undefined && (parseInt(flags, 8) & O_CLOEXEC) === 0) found.push(fd);
  }
  return found.sort((a, b) => a - b);
}
